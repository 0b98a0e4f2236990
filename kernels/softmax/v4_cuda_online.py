"""Softmax in CUDA C, online: the max and the sum in one pass, then the write (2 reads instead of 3)."""

from __future__ import annotations

import torch

from workbench import register

from ._cuda import run, spec

CU = "softmax_online.cu"
THREADS = 128  # rows per block


@register("softmax", "cuda_online", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_online"),
          idea="CUDA C: one thread per row, online (max, sum) in a single pass, then the write: 2 reads, not 3.")
def cuda_online(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    return run(CU, "softmax_online", x, grid=(m + THREADS - 1) // THREADS, block=THREADS)
