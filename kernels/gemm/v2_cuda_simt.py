"""GEMM in CUDA C, SIMT: eight steps from one thread per output to CUTLASS-style warp tiling.

Each ``.cu`` file (in ``cu/``) exports one kernel body as ``<name>_f32/_f16/_bf16`` (fp32 accumulation);
``cu/gemm_common.cuh`` holds the guarded 4-wide loads. A host-side flag ``vec`` says whether K and N are multiples
of 4 and the pointers 16-byte aligned, so the kernels may use LDG.128/STG.128; ragged edges take a guarded scalar
path. On a GPU they run through cupy; in cpu mode the same source runs on the CPU engine. The tensor-core steps
are in ``v3_cuda_tensor_cores.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, is_aligned, only_dtype
from kernels.gemm.reference import output
from workbench import register
from workbench.interop import to_raw

CU = Path(__file__).with_name("cu")


def launch(base: str, a: torch.Tensor, b: torch.Tensor, tile: tuple[int, int], block: tuple[int, ...],
           rows_first: bool = False) -> torch.Tensor:
    """Return c = a @ b from ``cu/<base>.cu``'s kernel over ceil(M/tile_m) x ceil(N/tile_n) blocks of ``block``."""
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: an empty result, as torch gives (a grid of 0 blocks is a launch error)
        return c
    vec = int(k % 4 == 0 and n % 4 == 0 and is_aligned(a, b, c))
    gm, gn = (m + tile[0] - 1) // tile[0], (n + tile[1] - 1) // tile[1]
    grid = (gm, gn) if rows_first else (gn, gm)
    cuda_kernel(CU / f"{base}.cu", base, a.dtype)(
        grid, block, (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k), np.int32(vec)))
    return c


def spec(base: str) -> dict:
    """Return what wb.inspect compiles: ``cu/<base>.cu``'s fp32 instance, built alone."""
    return cuda_spec(CU / f"{base}.cu", base, options=only_dtype(torch.float32))


@register("gemm", "cuda_naive", backend="cuda", cu_file="cu/sgemm_naive.cu", inspect_spec=lambda: spec("sgemm_naive"),
          idea="One thread per output, threadIdx.x over rows: every warp load is 32 separate sectors.")
def cuda_naive(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_naive", a, b, tile=(16, 16), block=(16, 16), rows_first=True)


@register("gemm", "cuda_coalesced", backend="cuda", cu_file="cu/sgemm_coalesced.cu",
          inspect_spec=lambda: spec("sgemm_coalesced"),
          idea="threadIdx.x over columns: a warp reads 128 contiguous bytes of b and writes 128 of c.")
def cuda_coalesced(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_coalesced", a, b, tile=(8, 32), block=(32, 8))


@register("gemm", "cuda_smem", backend="cuda", cu_file="cu/sgemm_smem.cu", inspect_spec=lambda: spec("sgemm_smem"),
          idea="32x32 tiles of a and b in shared memory: each global load is reused 32 times.")
def cuda_smem(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_smem", a, b, tile=(32, 32), block=(32, 32))


@register("gemm", "cuda_1d_blocktile", backend="cuda", cu_file="cu/sgemm_1d_blocktile.cu",
          inspect_spec=lambda: spec("sgemm_1d_blocktile"),
          idea="64x64 block tile, each thread a column of 8 results: 8 FMAs per shared load of b.")
def cuda_1d_blocktile(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_1d_blocktile", a, b, tile=(64, 64), block=(512,))


@register("gemm", "cuda_2d_blocktile", backend="cuda", cu_file="cu/sgemm_2d_blocktile.cu",
          inspect_spec=lambda: spec("sgemm_2d_blocktile"),
          idea="128x128 block tile, each thread an 8x8 register tile: 64 FMAs per 16 shared loads.")
def cuda_2d_blocktile(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_2d_blocktile", a, b, tile=(128, 128), block=(256,))


@register("gemm", "cuda_vectorized", backend="cuda", cu_file="cu/sgemm_vectorized.cu",
          inspect_spec=lambda: spec("sgemm_vectorized"),
          idea="The 2D block-tiling kernel with 128-bit loads and stores and a transposed a tile (LDG/LDS/STG.128).")
def cuda_vectorized(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_vectorized", a, b, tile=(128, 128), block=(256,))


@register("gemm", "cuda_nobank", backend="cuda", cu_file="cu/sgemm_nobank.cu",
          inspect_spec=lambda: spec("sgemm_nobank"),
          idea="The vectorized kernel without bank conflicts: a padded transposed a tile, split 4-wide groups for b.")
def cuda_nobank(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_nobank", a, b, tile=(128, 128), block=(256,))


@register("gemm", "cuda_warptile", backend="cuda", cu_file="cu/sgemm_warptile.cu",
          inspect_spec=lambda: spec("sgemm_warptile"),
          idea="Block, warp and thread tiles (128x128 / 64x64 / 8x4 x4): CUTLASS-style SIMT SGEMM.")
def cuda_warptile(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return launch("sgemm_warptile", a, b, tile=(128, 128), block=(128,))
