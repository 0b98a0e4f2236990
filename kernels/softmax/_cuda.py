"""Launch the softmax CUDA C kernels: one extern "C" kernel per dtype, named ``<base>_f32/_f16/_bf16``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench import empty_like
from workbench.interop import to_raw

HERE = Path(__file__).parent
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
VEC = {torch.float32: 4, torch.float16: 8, torch.bfloat16: 8}  # elements per 16-byte load
_kernels: dict[tuple[str, str], object] = {}


def kernel(cu: str | Path, base: str, dtype: torch.dtype):
    """Return the compiled kernel ``<base>_<dtype>`` of ``cu`` (a name in this folder, or a path; cached)."""
    from workbench import cuda

    name = f"{base}_{SUFFIX[dtype]}"
    if (cu, name) not in _kernels:
        _kernels[(cu, name)] = cuda.RawKernel(HERE / cu, name)
    return _kernels[(cu, name)]


def run(cu: str | Path, base: str, x: torch.Tensor, grid: int, block: int | tuple[int, ...],
        shared_mem: int = 0) -> torch.Tensor:
    """Launch ``kernel(x, out, M, N)`` over ``grid`` blocks of ``block`` threads and return ``out``."""
    out = empty_like(x)
    m, n = x.shape
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives (a row-per-block grid would read past x)
        return out
    kernel(cu, base, x.dtype)((max(1, grid),), block if isinstance(block, tuple) else (block,),
                              (to_raw(x), to_raw(out), np.int32(m), np.int32(n)), shared_mem=shared_mem)
    return out


def pow2_threads(work: int, lo: int = 32, hi: int = 1024) -> int:
    """Return the power of two in [lo, hi] closest above ``work`` (threads for ``work`` items per row)."""
    t = lo
    while t < work and t < hi:
        t *= 2
    return t


def spec(cu: str, base: str) -> dict:
    """Return what wb.inspect compiles: the fp32 instance of the kernel."""
    return {"kind": "cuda", "code": HERE / cu, "name": f"{base}_f32", "options": ()}


def aligned16(x: torch.Tensor) -> torch.Tensor:
    """Return ``x``, or a 16-byte aligned copy when its data does not start on a 16-byte boundary."""
    return x if x.data_ptr() % 16 == 0 else x.clone()
