"""GEMM in Numba, four steps: naive, coalesced, shared-memory tiled, 2D register-blocked.

Every kernel accumulates in fp32 whatever the input dtype (fp16 products are exact in fp32) and rounds once
when it stores. Under the CUDA simulator (cpu mode) each CUDA thread is an OS thread, so these run at roughly
1 us per multiply-add: fine for the checker's shapes, useless for timing.
"""

from __future__ import annotations

import torch

from kernels.gemm.reference import output
from workbench import register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports
from workbench.registry import CpuLimit

TILE = 16  # 16x16 = 256 threads per block for numba_naive, numba_coalesced and numba_smem
# numba_regblock: a 64x64 block tile, 8-deep K slices, 16x16 = 256 threads each computing a 4x4 micro-tile
# (16 accumulators)
BM, BN, BK, TM, TN = 64, 64, 8, 4, 4


# The simulator runs ~15 us per multiply-add: 64^3 takes ~4 s, 127x65x129 ~15-50 s per call.
SIM_LIMIT = CpuLimit("M*N*K", 64**3, "the Numba CUDA simulator, ~15 us per multiply-add: a minute past that")


def _grid(m: int, n: int, bm: int, bn: int) -> tuple[int, int]:
    return (n + bn - 1) // bn, (m + bm - 1) // bm  # x over columns, y over rows: ceil-divided, ragged edges masked


# -------------------------------------------------------------------------------------------------------- numba_naive
@cuda.jit
def naive_kernel(a, b, c, m, n, k):
    # threadIdx.x walks ROWS: the 32 lanes of a warp read 32 different rows of a (stride K) and write 32 rows
    # of c (stride N), so each warp-wide load touches 32 sectors instead of 4.
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < m and col < n:
        acc = float32(0.0)
        for i in range(k):
            acc += float32(a[row, i]) * b[i, col]  # fp32 x fp16 -> fp32: exact products
        c[row, col] = acc


@register("gemm", "numba_naive", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=SIM_LIMIT,
          idea="One thread per output; threadIdx.x walks rows, so warps read a and write c with stride (uncoalesced).")
def numba_naive(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: a grid of 0 blocks is a launch error on a GPU, so launch nothing
        return c
    grid = ((m + TILE - 1) // TILE, (n + TILE - 1) // TILE)
    naive_kernel[grid, (TILE, TILE)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c


# ---------------------------------------------------------------------------------------------------- numba_coalesced
@cuda.jit
def coalesced_kernel(a, b, c, m, n, k):
    # threadIdx.x walks COLUMNS: a warp reads one a[row, i] (broadcast) and 32 consecutive b[i, col] (128 B).
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < m and col < n:
        acc = float32(0.0)
        for i in range(k):
            acc += float32(a[row, i]) * b[i, col]  # fp32 x fp16 -> fp32: exact products
        c[row, col] = acc


@register("gemm", "numba_coalesced", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=SIM_LIMIT,
          idea="Swap the thread mapping: threadIdx.x walks columns, so a warp reads 128 contiguous bytes of b.")
def numba_coalesced(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: a grid of 0 blocks is a launch error on a GPU, so launch nothing
        return c
    coalesced_kernel[_grid(m, n, TILE, TILE), (TILE, TILE)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c


# --------------------------------------------------------------------------------------------------------- numba_smem
@cuda.jit
def smem_kernel(a, b, c, m, n, k):
    # Each 16x16 block stages a 16x16 tile of a and of b in shared memory per K step: every element loaded from
    # global memory is reused 16 times, cutting global traffic 16x against numba_coalesced.
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    acc = float32(0.0)
    for k0 in range(0, k, TILE):
        # Out-of-range elements load as 0 so the ragged last tile adds nothing.
        sa[ty, tx] = float32(a[row, k0 + tx]) if row < m and k0 + tx < k else float32(0.0)
        sb[ty, tx] = float32(b[k0 + ty, col]) if k0 + ty < k and col < n else float32(0.0)
        cuda.syncthreads()  # the tile is complete before anyone reads it
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()  # everyone is done reading before the next tile overwrites it
    if row < m and col < n:
        c[row, col] = acc


@register("gemm", "numba_smem", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=SIM_LIMIT,
          idea="16x16 tiles of a and b staged in shared memory: each global load is reused 16 times.")
def numba_smem(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: a grid of 0 blocks is a launch error on a GPU, so launch nothing
        return c
    smem_kernel[_grid(m, n, TILE, TILE), (TILE, TILE)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c


# ----------------------------------------------------------------------------------------------------- numba_regblock
@cuda.jit
def regblock_kernel(a, b, c, m, n, k):
    # 256 threads compute a 64x64 tile of c; thread (ty, tx) owns rows ty*4..+4 and columns tx*4..+4.
    # Per 8-deep K slice a thread reads 4 values of a and 4 of b from shared memory and does 16 FMAs:
    # 2 shared loads per FMA in numba_smem become 0.5 here.
    sa = cuda.shared.array((BM, BK), float32)
    sb = cuda.shared.array((BK, BN), float32)
    acc = cuda.local.array((TM, TN), float32)
    ra = cuda.local.array(TM, float32)
    rb = cuda.local.array(TN, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tid = ty * 16 + tx
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = float32(0.0)
    for k0 in range(0, k, BK):
        # 512 elements per tile, 256 threads: two loads each (a: 64 rows x 8; b: 8 rows x 64).
        for r in range(2):
            e = tid + r * 256
            ar, ac = e // BK, e % BK
            gr, gc = row0 + ar, k0 + ac
            sa[ar, ac] = float32(a[gr, gc]) if gr < m and gc < k else float32(0.0)
            br, bc = e // BN, e % BN
            gr, gc = k0 + br, col0 + bc
            sb[br, bc] = float32(b[gr, gc]) if gr < k and gc < n else float32(0.0)
        cuda.syncthreads()
        for kk in range(BK):
            for i in range(TM):
                ra[i] = sa[ty * TM + i, kk]
            for j in range(TN):
                rb[j] = sb[kk, tx * TN + j]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += ra[i] * rb[j]
        cuda.syncthreads()
    for i in range(TM):
        for j in range(TN):
            r, q = row0 + ty * TM + i, col0 + tx * TN + j
            if r < m and q < n:
                c[r, q] = acc[i, j]


@register("gemm", "numba_regblock", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=SIM_LIMIT,
          idea="64x64 block tile, each thread a 4x4 micro-tile in registers: 16 FMAs per 8 shared-memory loads.")
def numba_regblock(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: a grid of 0 blocks is a launch error on a GPU, so launch nothing
        return c
    regblock_kernel[_grid(m, n, BM, BN), (16, 16)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c
