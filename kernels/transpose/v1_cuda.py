"""Transpose in CUDA C through workbench.cuda.RawKernel: naive, a shared-memory tile, the tile padded by one column.

All three launch 32 x 8 threads per 32 x 32 tile (``transpose.cu``); they differ only in how they touch memory,
which is the whole lesson: ``wb.profile`` shows the naive kernel's 32 sectors per store request, the shared tile's
32-way bank conflicts, and the padded tile with neither.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench import empty, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("transpose.cu")
TILE, ROWS = 32, 8
_kernels: dict = {}


def launch(name: str, x: torch.Tensor) -> torch.Tensor:
    """Run kernel ``name`` of transpose.cu over x[m, n] (one block per 32 x 32 tile) and return out[n, m]."""
    from workbench import cuda

    if name not in _kernels:
        _kernels[name] = cuda.RawKernel(CU, name)
    m, n = x.shape
    out = empty((n, m), x.dtype, x.device)
    if out.numel() == 0:  # a grid of 0 blocks is a launch error: an empty result, as torch gives
        return out
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    _kernels[name](grid, (TILE, ROWS), (to_raw(x), to_raw(out), np.int32(m), np.int32(n)))
    return out


def _spec(name: str):
    return lambda: {"kind": "cuda", "code": CU, "name": name, "options": ()}


@register("transpose", "cuda_naive", backend="cuda", cu_file="transpose.cu", dtypes=("float32",),
          inspect_spec=_spec("transpose_naive_f32"),
          idea="Read rows, write columns: coalesced loads, but each warp store scatters over 32 sectors.")
def cuda_naive(x: torch.Tensor) -> torch.Tensor:
    return launch("transpose_naive_f32", x)


@register("transpose", "cuda_smem", backend="cuda", cu_file="transpose.cu", dtypes=("float32",),
          inspect_spec=_spec("transpose_smem_f32"),
          idea="A 32x32 shared tile: both global sides coalesced, but reading a tile column is a 32-way bank conflict.")
def cuda_smem(x: torch.Tensor) -> torch.Tensor:
    return launch("transpose_smem_f32", x)


@register("transpose", "cuda_padded", backend="cuda", cu_file="transpose.cu", dtypes=("float32",),
          inspect_spec=_spec("transpose_padded_f32"),
          idea="The shared tile padded to 33 columns: a tile column spans all 32 banks, so no bank conflicts.")
def cuda_padded(x: torch.Tensor) -> torch.Tensor:
    return launch("transpose_padded_f32", x)
