"""Softmax in CUDA C, one warp per row: coalesced strided loads and a shuffle (butterfly) reduction."""

from __future__ import annotations

import torch

from workbench import register

from ._cuda import run, spec

CU = "softmax_warp.cu"
ROWS = 4  # warps (rows) per block: 128 threads


@register("softmax", "cuda_warp", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_warp"),
          idea="CUDA C: one warp per row, coalesced loads, online (max, sum) merged by 5 __shfl_xor_sync steps.")
def cuda_warp(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    return run(CU, "softmax_warp", x, grid=(m + ROWS - 1) // ROWS, block=(32, ROWS))
