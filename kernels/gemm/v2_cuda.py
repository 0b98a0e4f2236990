"""GEMM in CUDA C through workbench.cuda.RawKernel: eight SIMT steps from naive to warptiling, then tensor cores.

Each SIMT ``.cu`` file (in ``cu/``) exports one kernel body as ``<name>_f32/_f16/_bf16`` (fp32 accumulation);
``cu/gemm_common.cuh`` holds the conversions and the guarded 4-wide loads. A host-side flag ``vec`` says whether
K and N are multiples of 4 and the pointers aligned, so the kernels may use LDG.128/STG.128; ragged edges take a
guarded scalar path. On a GPU they run through cupy; in cpu mode the same source runs on the CPU engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from kernels.gemm.reference import tma_supports
from workbench import empty, register
from workbench.contracts import require
from workbench.interop import to_raw

CU = Path(__file__).with_name("cu")
_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_kernels: dict = {}


def kernel(cu_file: str, name: str, arch: str | None = None):
    """Return (and cache) the RawKernel ``name`` of ``cu/<cu_file>`` (``arch="sm_90a"``: built with nvcc)."""
    from workbench import cuda

    key = (cu_file, name, arch)
    if key not in _kernels:
        _kernels[key] = cuda.RawKernel(CU / cu_file, name, arch=arch)
    return _kernels[key]


def _aligned(*ts: torch.Tensor, nbytes: int = 16) -> bool:
    return all(t.data_ptr() % nbytes == 0 for t in ts)


def _launcher(cu_file: str, base: str, tile: tuple[int, int], block: tuple[int, ...],
              grid_rows_first: bool = False) -> Callable:
    """Return gemm(a, b) launching ``base_<dtype>`` over ceil(M/tile_m) x ceil(N/tile_n) blocks."""
    tm, tn = tile

    def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = empty((m, n), a.dtype, a.device)
        if c.numel() == 0:  # M or N is 0: an empty result, as torch gives (a grid of 0 blocks is a launch error)
            return c
        vec = int(k % 4 == 0 and n % 4 == 0 and _aligned(a, b, c))
        gm, gn = (m + tm - 1) // tm, (n + tn - 1) // tn
        grid = (gm, gn) if grid_rows_first else (gn, gm)
        kernel(cu_file, f"{base}_{_SUFFIX[a.dtype]}")(
            grid, block, (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k), np.int32(vec)))
        return c

    return gemm


def _spec(cu_file: str, name: str, options: tuple = ()) -> Callable[[], dict]:
    return lambda: {"kind": "cuda", "code": CU / cu_file, "name": name, "options": options}


def _simt(name: str, cu_file: str, base: str, tile: tuple[int, int], block: tuple[int, ...], *, idea: str,
          rows_first: bool = False) -> None:
    fn = _launcher(cu_file, base, tile, block, rows_first)
    fn.__name__ = name
    register("gemm", name, backend="cuda", cu_file=f"cu/{cu_file}", idea=idea,
             inspect_spec=_spec(cu_file, f"{base}_f32", ("-DGEMM_F32_ONLY",)))(fn)


_simt("cuda_naive", "sgemm_naive.cu", "sgemm_naive", (16, 16), (16, 16), rows_first=True,
      idea="One thread per output, threadIdx.x over rows: every warp load is 32 separate sectors.")
_simt("cuda_coalesced", "sgemm_coalesced.cu", "sgemm_coalesced", (8, 32), (32, 8),
      idea="threadIdx.x over columns: a warp reads 128 contiguous bytes of b and writes 128 of c.")
_simt("cuda_smem", "sgemm_smem.cu", "sgemm_smem", (32, 32), (32, 32),
      idea="32x32 tiles of a and b in shared memory: each global load is reused 32 times.")
_simt("cuda_1d_blocktile", "sgemm_1d_blocktile.cu", "sgemm_1d_blocktile", (64, 64), (512,),
      idea="64x64 block tile, each thread a column of 8 results: 8 FMAs per shared load of b.")
_simt("cuda_2d_blocktile", "sgemm_2d_blocktile.cu", "sgemm_2d_blocktile", (128, 128), (256,),
      idea="128x128 block tile, each thread an 8x8 register tile: 64 FMAs per 16 shared loads.")
_simt("cuda_vectorized", "sgemm_vectorized.cu", "sgemm_vectorized", (128, 128), (256,),
      idea="The 2D block-tiling kernel with 128-bit loads and stores and a transposed a tile (LDG/LDS/STG.128).")
_simt("cuda_nobank", "sgemm_nobank.cu", "sgemm_nobank", (128, 128), (256,),
      idea="The vectorized kernel without bank conflicts: a padded transposed a tile, split 4-wide groups for b.")
_simt("cuda_warptile", "sgemm_warptile.cu", "sgemm_warptile", (128, 128), (128,),
      idea="Block, warp and thread tiles (128x128 / 64x64 / 8x4 x4): CUTLASS-style SIMT SGEMM.")


# ------------------------------------------------------------------------------------------------- tensor cores
@register("gemm", "cuda_wmma", backend="cuda", cu_file="cu/hgemm_wmma.cu", dtypes=("float16", "bfloat16"),
          inspect_spec=_spec("hgemm_wmma.cu", "hgemm_wmma_f16"),
          idea="Tensor cores via nvcuda::wmma: 16x16x16 fp16/bf16 fragments, fp32 accumulators, 64x64 per block.")
def cuda_wmma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    if c.numel() == 0:  # an empty result, as torch gives (a grid of 0 blocks is a launch error)
        return c
    grid = ((n + 63) // 64, (m + 63) // 64)
    kernel("hgemm_wmma.cu", f"hgemm_wmma_{_SUFFIX[a.dtype]}")(
        grid, (128,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k)))
    return c


MMA_SMEM = 3 * (128 * 40 + 32 * 136) * 2  # bytes: 3 stages of a (128x40) and b (32x136) halves = 58,368


@register("gemm", "cuda_mma_sync", backend="cuda", cu_file="cu/hgemm_mma_sync.cu", dtypes=("float16", "bfloat16"),
          gpu_only=True, gpu_note="inline PTX: mma.sync, ldmatrix and cp.async (sm_80+)",
          inspect_spec=_spec("hgemm_mma_sync.cu", "hgemm_mma_sync_f16"),
          idea="mma.sync m16n8k16 from ldmatrix fragments, a 3-stage cp.async pipeline, 128x128x32 tiles.")
def cuda_mma_sync(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    if c.numel() == 0 or k == 0:  # an empty result, or K = 0: every dot product is an empty sum, as torch gives
        return c.zero_()
    vec = int(k % 8 == 0 and n % 8 == 0 and _aligned(a, b))
    fn = kernel("hgemm_mma_sync.cu", f"hgemm_mma_sync_{_SUFFIX[a.dtype]}")
    fn.max_dynamic_shared_size_bytes = MMA_SMEM  # above the 48 KiB default: opt in
    grid = ((n + 127) // 128, (m + 127) // 128)
    fn(grid, (256,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k), np.int32(vec)),
       shared_mem=MMA_SMEM)
    return c


# ------------------------------------------------------------------------------------------------- Hopper
WGMMA_SMEM = 4 * (128 * 64 + 64 * 256) * 2 + 1024  # bytes: 4 stages of a (128x64) and b (64x256), +1 KiB to align


def _wgmma_spec() -> dict:
    return {**_spec("hgemm_wgmma_tma.cu", "hgemm_wgmma_tma_bf16")(), "arch": "sm_90a"}


@register("gemm", "cuda_wgmma_tma", backend="cuda", cu_file="cu/hgemm_wgmma_tma.cu", dtypes=("float16", "bfloat16"),
          gpu_only=True, supports=tma_supports, inspect_spec=_wgmma_spec,
          gpu_note="inline PTX: wgmma, TMA, mbarriers and setmaxnreg (sm_90a: Hopper only, built with nvcc)",
          idea="Hopper: a TMA producer warpgroup feeds a 4-stage mbarrier ring, two consumers run wgmma 64x256x16.")
def cuda_wgmma_tma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from workbench.cuda.tma import tensor_maps_on_device

    m, k = a.shape
    n = b.shape[1]
    require("gemm", _aligned(a, b), "cuda_wgmma_tma loads a and b with TMA, which needs 16-byte-aligned base "
            f"addresses; got a at {a.data_ptr():#x}, b at {b.data_ptr():#x} (a sliced view? pass a fresh tensor)")
    c = empty((m, n), a.dtype, a.device)
    if c.numel() == 0 or k == 0:  # a TMA map needs every dimension >= 1; K = 0: every dot product is 0, as torch
        return c.zero_()
    fn = kernel("hgemm_wgmma_tma.cu", f"hgemm_wgmma_tma_{_SUFFIX[a.dtype]}", arch="sm_90a")
    fn.max_dynamic_shared_size_bytes = WGMMA_SMEM  # above the 48 KiB default: opt in
    maps = tensor_maps_on_device([(a, 128, 64), (b, 64, 64)])  # a boxes 128 rows x 64 k, b 64 k x 64 columns
    tiles = ((m + 127) // 128) * ((n + 255) // 256)
    fn((tiles,), (384,), (to_raw(maps), to_raw(c), np.int32(m), np.int32(n), np.int32(k)), shared_mem=WGMMA_SMEM)
    return c
