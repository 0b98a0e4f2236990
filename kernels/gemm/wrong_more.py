"""More known-wrong gemm kernels: a CUDA C shared-memory tile race, a dropped K tail, a grid that drops rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench import empty, register
from workbench._numba import cuda, numba_supports
from workbench.interop import to_numba, to_raw

CU = Path(__file__).parent / "cu" / "wrong_gemm.cu"
_kernels: dict = {}


def _kernel(name: str):
    from workbench import cuda as wcuda

    if name not in _kernels:
        _kernels[name] = wcuda.RawKernel(CU, name)
    return _kernels[name]


@register("gemm", "wrong_missing_syncthreads", backend="cuda", cu_file="cu/wrong_gemm.cu", dtypes=("float32",),
          expected_diagnosis="race",
          idea="KNOWN WRONG: shared-memory tiles with no __syncthreads() between loading a tile and using it.")
def wrong_missing_syncthreads(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    grid = ((n + 31) // 32, (m + 31) // 32)
    _kernel("sgemm_smem_nosync")(grid, (32, 32), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n),
                                                   np.int32(k)))
    return c


@register("gemm", "wrong_k_tail", backend="cuda", cu_file="cu/wrong_gemm.cu", dtypes=("float32",),
          expected_diagnosis="scattered",
          idea="KNOWN WRONG: the K loop stops at the last full 32-wide tile, dropping the K % 32 tail of every dot.")
def wrong_k_tail(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    grid = ((n + 31) // 32, (m + 31) // 32)
    _kernel("sgemm_smem_k_tail")(grid, (32, 32), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n),
                                                   np.int32(k)))
    return c


@cuda.jit
def _rows_kernel(a, b, c, m, n, k):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < m and col < n:
        acc = 0.0
        for i in range(k):
            acc += a[row, i] * b[i, col]
        c[row, col] = acc


@register("gemm", "wrong_floor_grid", backend="numba", dtypes=("float32",), expected_diagnosis="unwritten_rows",
          supports=numba_supports(lambda s: None if s["M"] * s["N"] * s["K"] <= 64**3
                                         else "simulator: M*N*K <= 64^3 in cpu mode"),
          idea="KNOWN WRONG: launches M // 16 block-rows (floor), so the last M % 16 rows are never written.")
def wrong_floor_grid(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    grid = ((n + 15) // 16, max(1, m // 16))  # BUG: should be ceil(m / 16)
    _rows_kernel[grid, (16, 16)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c
