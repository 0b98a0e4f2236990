"""Known-wrong gemm kernels: each keeps one classic bug so tests can assert the checker names it.

A rounded accumulator (Triton), a shared-memory tile race and a dropped K tail (CUDA C, ``cu/wrong_gemm.cu``), and
a grid that drops rows (Numba).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from kernels._launch import cuda_kernel
from kernels.gemm.reference import output
from workbench import register
from workbench.interop import to_numba, to_raw
from workbench.numba_helpers import cuda, numba_supports
from workbench.registry import CpuLimit

BM, BN, BK = 16, 16, 16
CU = Path(__file__).parent / "cu" / "wrong_gemm.cu"


@triton.jit
def gemm_fp16_acc(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        # BUG: the running sum is rounded to fp16 after every K step (11-bit mantissa, ~5e-4 relative).
        acc = (acc + tl.dot(a, b, input_precision="ieee")).to(tl.float16).to(tl.float32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@register("gemm", "wrong_fp16_accumulator", backend="triton", expected_diagnosis="precision",
          dtypes=("float32",),
          idea="KNOWN WRONG: rounds the accumulator to fp16 after every K tile, losing ~3 digits.")
def wrong_fp16_accumulator(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    gemm_fp16_acc[(triton.cdiv(m, BM), triton.cdiv(n, BN))](a, b, c, m, n, k, BM=BM, BN=BN, BK=BK)
    return c


def _smem_tiles(name: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Run ``cu/wrong_gemm.cu``'s kernel ``name`` (32x32 shared-memory tiles, a thread per element of c); return c."""
    c, m, n, k = output(a, b)
    grid = ((n + 31) // 32, (m + 31) // 32)
    cuda_kernel(CU, name)(grid, (32, 32), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k)))
    return c


@register("gemm", "wrong_missing_syncthreads", backend="cuda", cu_file="cu/wrong_gemm.cu", dtypes=("float32",),
          expected_diagnosis="race",
          idea="KNOWN WRONG: shared-memory tiles with no __syncthreads() between loading a tile and using it.")
def wrong_missing_syncthreads(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _smem_tiles("sgemm_smem_nosync", a, b)


@register("gemm", "wrong_k_tail", backend="cuda", cu_file="cu/wrong_gemm.cu", dtypes=("float32",),
          expected_diagnosis="k_tail",
          idea="KNOWN WRONG: the K loop stops at the last full 32-wide tile, dropping the K % 32 tail of every dot.")
def wrong_k_tail(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _smem_tiles("sgemm_smem_k_tail", a, b)


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
          supports=numba_supports(), cpu_limit=CpuLimit("M*N*K", 64**3, "the Numba simulator"),
          idea="KNOWN WRONG: launches M // 16 block-rows (floor), so the last M % 16 rows are never written.")
def wrong_floor_grid(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    grid = ((n + 15) // 16, max(1, m // 16))  # BUG: should be ceil(m / 16)
    _rows_kernel[grid, (16, 16)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c
