"""Softmax in CUDA C, naive: one thread per row, three passes (max, sum, write), uncoalesced."""

from __future__ import annotations

import torch

from workbench import register

from ._cuda import run, spec

CU = "softmax_naive.cu"
THREADS = 128  # rows per block


@register("softmax", "cuda_naive", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_naive"),
          idea="CUDA C: one thread per row, three passes; a warp's 32 loads are N elements apart (uncoalesced).")
def cuda_naive(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    return run(CU, "softmax_naive", x, grid=(m + THREADS - 1) // THREADS, block=THREADS)
