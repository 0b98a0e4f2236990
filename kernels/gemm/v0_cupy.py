"""GEMM from CuPy: ``cupy.matmul``, cuBLAS seen from CuPy, beside the torch.matmul baseline.

One call, one vendor GEMM: on a GPU cupy hands the multiply to cuBLAS, as torch does, so this rung is the same
yardstick from the array library a numpy user starts with. In cpu mode numpy.matmul (a CPU BLAS) stands in.
"""

from __future__ import annotations

import torch

import workbench.cupy as cp
from workbench import register


@register("gemm", "cupy_matmul", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: cupy.matmul(a, b), a cuBLAS GEMM on a GPU (numpy's BLAS on CPU).")
def cupy_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return cp.to_torch(cp.matmul(cp.from_torch(a), cp.from_torch(b)), a.dtype)
