"""Softmax in CUDA C, one block per row for long rows: warp shuffles, then shared memory across warps."""

from __future__ import annotations

import torch

from kernels._launch import pow2_threads
from workbench import register

from ._cuda import run, spec

CU = "softmax_block.cu"


@register("softmax", "cuda_block", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_block"),
          idea="CUDA C: one block (<= 1024 threads) per row; shuffle within warps, shared memory across warps.")
def cuda_block(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    threads = pow2_threads((n + 7) // 8)  # >= 8 elements per thread amortise the reduction; 32..1024 threads
    return run(CU, "softmax_block", x, grid=m, block=threads)
