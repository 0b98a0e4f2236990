"""GEMM in CUDA C on tensor cores: wmma fragments, then mma.sync with a cp.async pipeline, then Hopper's wgmma + TMA.

The kernels live in ``cu/hgemm_*.cu`` and take fp16/bf16 (fp32 accumulation). ``cuda_wmma`` runs on the CPU
engine too (``nvcuda::wmma`` has a CPU implementation there); the inline-PTX kernels are GPU-only, and
``wb.inspect`` shows their sm_90 / sm_90a code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, is_aligned
from kernels.gemm.reference import output, tma_supports
from workbench import empty, register
from workbench.contracts import require
from workbench.interop import to_raw

CU = Path(__file__).with_name("cu")


@register("gemm", "cuda_wmma", backend="cuda", cu_file="cu/hgemm_wmma.cu", dtypes=("float16", "bfloat16"),
          inspect_spec=lambda: cuda_spec(CU / "hgemm_wmma.cu", "hgemm_wmma", torch.float16),
          idea="Tensor cores via nvcuda::wmma: 16x16x16 fp16/bf16 fragments, fp32 accumulators, 64x64 per block.")
def cuda_wmma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # an empty result, as torch gives (a grid of 0 blocks is a launch error)
        return c
    grid = ((n + 63) // 64, (m + 63) // 64)
    cuda_kernel(CU / "hgemm_wmma.cu", "hgemm_wmma", a.dtype)(
        grid, (128,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k)))
    return c


MMA_SMEM = 3 * (128 * 40 + 32 * 136) * 2  # bytes: 3 stages of a (128x40) and b (32x136) halves = 58,368


@register("gemm", "cuda_mma_sync", backend="cuda", cu_file="cu/hgemm_mma_sync.cu", dtypes=("float16", "bfloat16"),
          gpu_only=True, gpu_note="inline PTX: mma.sync, ldmatrix and cp.async (sm_80+)",
          inspect_spec=lambda: cuda_spec(CU / "hgemm_mma_sync.cu", "hgemm_mma_sync", torch.float16),
          idea="mma.sync m16n8k16 from ldmatrix fragments, a 3-stage cp.async pipeline, 128x128x32 tiles.")
def cuda_mma_sync(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0 or k == 0:  # an empty result, or K = 0: every dot product is an empty sum, as torch gives
        return c.zero_()
    vec = int(k % 8 == 0 and n % 8 == 0 and is_aligned(a, b))
    fn = cuda_kernel(CU / "hgemm_mma_sync.cu", "hgemm_mma_sync", a.dtype)
    fn.max_dynamic_shared_size_bytes = MMA_SMEM  # above the 48 KiB default: opt in
    grid = ((n + 127) // 128, (m + 127) // 128)
    fn(grid, (256,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n), np.int32(k), np.int32(vec)),
       shared_mem=MMA_SMEM)
    return c


# ------------------------------------------------------------------------------------------------- Hopper
WGMMA_SMEM = 4 * (128 * 64 + 64 * 256) * 2 + 1024  # bytes: 4 stages of a (128x64) and b (64x256), +1 KiB to align


@register("gemm", "cuda_wgmma_tma", backend="cuda", cu_file="cu/hgemm_wgmma_tma.cu", dtypes=("float16", "bfloat16"),
          gpu_only=True, supports=tma_supports,
          inspect_spec=lambda: cuda_spec(CU / "hgemm_wgmma_tma.cu", "hgemm_wgmma_tma", torch.bfloat16, arch="sm_90a"),
          gpu_note="inline PTX: wgmma, TMA, mbarriers and setmaxnreg (sm_90a: Hopper only, built with nvcc)",
          idea="Hopper: a TMA producer warpgroup feeds a 4-stage mbarrier ring, two consumers run wgmma 64x256x16.")
def cuda_wgmma_tma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from workbench.cuda.tma import tensor_maps_on_device

    m, k = a.shape
    n = b.shape[1]
    require("gemm", is_aligned(a, b), "cuda_wgmma_tma loads a and b with TMA, which needs 16-byte-aligned base "
            f"addresses; got a at {a.data_ptr():#x}, b at {b.data_ptr():#x} (a sliced view? pass a fresh tensor)")
    c = empty((m, n), a.dtype, a.device)
    if c.numel() == 0 or k == 0:  # a TMA map needs every dimension >= 1; K = 0: every dot product is 0, as torch
        return c.zero_()
    fn = cuda_kernel(CU / "hgemm_wgmma_tma.cu", "hgemm_wgmma_tma", a.dtype, arch="sm_90a")
    fn.max_dynamic_shared_size_bytes = WGMMA_SMEM  # above the 48 KiB default: opt in
    maps = tensor_maps_on_device([(a, 128, 64), (b, 64, 64)])  # a boxes 128 rows x 64 k, b 64 k x 64 columns
    tiles = ((m + 127) // 128) * ((n + 255) // 256)
    fn((tiles,), (384,), (to_raw(maps), to_raw(c), np.int32(m), np.int32(n), np.int32(k)), shared_mem=WGMMA_SMEM)
    return c
