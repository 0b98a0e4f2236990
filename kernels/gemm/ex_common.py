"""The given parts of the gemm exercises: the kernels around the learner's helpers, and their launches.

- gemm-smem-tiling (Numba): ``smem_kernel`` gives each 16 x 16 block its two shared tiles and its thread's output
  coordinates; the learner's ``@cuda.jit(device=True)`` helper ``tile_gemm(a, b, c, m, n, k, sa, sb, row, col,
  ty, tx)`` walks K through the tiles and stores c[row, col]. :func:`smem_gemm` launches it.
- gemm-register-blocking (Numba): ``regblock_kernel`` gives each thread its T x T accumulators (zeroed) and two
  T-long register rows; the helper ``block_gemm(a, b, c, m, n, k, acc, ra, rb)`` fills and stores the T x T block.
  :func:`regblock_gemm` launches it.
- gemm-triton-grouped (Triton): ``grouped_kernel`` computes one BM x BN tile of c per program of a 1-D grid; which
  tile a program takes comes from ``tile_of(pid, n_m, n_n, GROUP_M) -> (pid_m, pid_n)``, the helper the exercise
  writes. :func:`grouped_gemm` binds it (kernels/_triton_hooks.py) and launches the kernel.

A Numba kernel calls its helper through a closure, as GPU-Puzzles builds its kernels (``cuda.jit(make(helper))``):
one kernel per helper object, built on first use and kept while the helper lives, so a launch per call compiles
once per helper, as a kernel that called it by name would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32  # stand-ins that refuse when numba is broken

BM, BN, BK, GROUP_M = 32, 32, 32, 4

tile_of = None  # the exercise's helper that grouped_kernel calls: bound per launch by grouped_gemm


@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr):
    pid = tl.program_id(0)  # a 1-D grid: one program per tile of c
    n_m = (M + BM - 1) // BM
    n_n = (N + BN - 1) // BN
    pid_m, pid_n = tile_of(pid, n_m, n_n, GROUP_M)  # the exercise's program order
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def grouped_gemm(tile_of: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b from grouped_kernel, each program's tile given by ``tile_of``."""
    kernel = with_helpers(grouped_kernel, "grouped_gemm", tile_of=tile_of)
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype, a.device)
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    kernel[grid](a, b, c, m, n, k, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M)
    return c


# ------------------------------------------------------------------------------------------ the Numba exercises
TILE = 16  # gemm-smem-tiling: 16 x 16 threads per block, 16 x 16 tiles of a and b in shared memory
T = 2  # gemm-register-blocking: each thread computes a T x T = 2 x 2 block of c
THREADS = 8  # gemm-register-blocking: 8 x 8 threads per block -> a 16 x 16 tile of c

_BUILT: dict[tuple[str, int], tuple[Any, Any]] = {}  # (factory, id(helper)) -> (helper, kernel)


def _built(make: Callable[[Any], Callable], caller: str, name: str, helper: Any) -> Any:
    """Return ``make(helper)`` compiled as a Numba kernel, built once per helper (a device function)."""
    if not getattr(helper, "_device", False) and not getattr(helper, "targetoptions", {}).get("device", False):
        raise TypeError(f"{caller}: {name} must be a @cuda.jit(device=True) function (the given kernel calls it on "
                        f"the GPU), got {helper!r}; put @cuda.jit(device=True) on the line above `def {name}`")
    key = (make.__name__, id(helper))
    hit = _BUILT.get(key)
    if hit is None or hit[0] is not helper:
        hit = _BUILT[key] = (helper, cuda.jit(make(helper)))
    return hit[1]


def _make_smem_kernel(tile_gemm):
    """Return the shared-memory GEMM kernel calling ``tile_gemm`` (the learner's) for one output element."""
    def smem_kernel(a, b, c, m, n, k):
        sa = cuda.shared.array((TILE, TILE), float32)  # this K slice's tile of a
        sb = cuda.shared.array((TILE, TILE), float32)  # and of b
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty  # this thread's element of c (may be outside it: ragged M, N)
        col = cuda.blockIdx.x * TILE + tx
        tile_gemm(a, b, c, m, n, k, sa, sb, row, col, ty, tx)
    return smem_kernel


def smem_gemm(tile_gemm: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b from smem_kernel: one 16 x 16 block of threads per 16 x 16 tile of c, ``tile_gemm`` per thread."""
    kernel = _built(_make_smem_kernel, "smem_gemm", "tile_gemm", tile_gemm)
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype, a.device)  # poisoned (NaN) under the checker
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    kernel[grid, (TILE, TILE)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c


def _make_regblock_kernel(block_gemm):
    """Return the register-blocked GEMM kernel calling ``block_gemm`` (the learner's) for one T x T block of c."""
    def regblock_kernel(a, b, c, m, n, k):
        acc = cuda.local.array((T, T), float32)  # this thread's T x T block of c
        ra = cuda.local.array(T, float32)  # T values of a column of a
        rb = cuda.local.array(T, float32)  # T values of a row of b
        for i in range(T):
            for j in range(T):
                acc[i, j] = float32(0.0)
        block_gemm(a, b, c, m, n, k, acc, ra, rb)
    return regblock_kernel


def regblock_gemm(block_gemm: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b from regblock_kernel: 8 x 8 threads per block, a T x T block of c per thread by ``block_gemm``."""
    kernel = _built(_make_regblock_kernel, "regblock_gemm", "block_gemm", block_gemm)
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype, a.device)
    tile = THREADS * T
    grid = ((n + tile - 1) // tile, (m + tile - 1) // tile)
    kernel[grid, (THREADS, THREADS)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c
