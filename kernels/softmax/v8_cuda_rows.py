"""Softmax in CUDA C for short rows: a warp per row, several rows per block, 16-byte loads, shuffles only."""

from __future__ import annotations

import torch

from workbench import register

from ._cuda import run, spec

CU = "softmax_rows.cu"
ROWS = 8  # rows (warps) per block: 256 threads


@register("softmax", "cuda_rows", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_rows"),
          alignment=16,
          idea="CUDA C for short rows: 8 rows per block, a warp per row, 16-byte loads, row in registers.")
def cuda_rows(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    return run(CU, "softmax_rows", x, grid=(m + ROWS - 1) // ROWS, block=(32, ROWS))  # x 16-byte aligned
