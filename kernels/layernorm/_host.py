"""What the layernorm CUDA C launchers share: the compiled kernels, the hardware limits, the launches.

Registers nothing. The thread counts come from the arch table (``workbench/cuda/arch.py``): the GPU's own row on a
GPU, Hopper's (sm_90, the tuned-for target) in cpu mode, so a launch never asks for more threads per block than
the device allows and the warp width is not a literal here.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype, pow2_threads
from workbench import MODE, empty_like
from workbench.cuda import arch
from workbench.interop import to_raw

CU = Path(__file__).parent / "cu"
WARP_ROWS = 4  # rows (warps) per block of the warp-per-row kernels
PER_THREAD = 8  # elements per thread the block-per-row kernel aims for: enough to amortise its two block reductions


@functools.cache
def limits() -> arch.ArchLimits:
    """Return the arch table's limits of this GPU (sm_90's in cpu mode; a GPU the table lacks gets sm_90's)."""
    if MODE != "gpu":
        return arch.get("sm_90")
    major, minor = torch.cuda.get_device_capability()
    try:
        return arch.get(f"sm_{major}{minor}")
    except ValueError:
        return arch.get("sm_90")


def spec(cu: str, base: str, dtype: torch.dtype = torch.float32) -> dict:
    """Return what wb.inspect compiles: ``base``'s instance for ``dtype`` in ``cu/<cu>``."""
    return cuda_spec(CU / cu, base, dtype, options=only_dtype(dtype))


def _kernel(cu: str, base: str, dtype: torch.dtype):  # noqa: ANN202  (a cupy RawKernel or the CPU engine's)
    return cuda_kernel(CU / cu, base, dtype, gpu_options=only_dtype(dtype))


def warp_per_row(cu: str, base: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Launch ``base(x, w, b, y, M, N, eps)`` with one warp per row, WARP_ROWS rows per block; return y."""
    m, n = x.shape
    out = empty_like(x)
    if out.numel():
        warp = limits().warp_size
        _kernel(cu, base, x.dtype)((-(-m // WARP_ROWS),), (warp, WARP_ROWS),
                                   (to_raw(x), to_raw(w), to_raw(b), to_raw(out), np.int32(m), np.int32(n),
                                    np.float32(eps)))
    return out


def block_threads(n: int) -> int:
    """Return the block-per-row kernel's threads for rows of ``n``: a power of two, one warp up to the arch's max."""
    lim = limits()
    return pow2_threads(-(-n // PER_THREAD), lo=lim.warp_size, hi=lim.max_threads_per_block)


def block_per_row(cu: str, base: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Launch ``base(x, w, b, y, N, eps)`` with one block per row; return y."""
    m, n = x.shape
    out = empty_like(x)
    if out.numel():
        _kernel(cu, base, x.dtype)((m,), (block_threads(n),),
                                   (to_raw(x), to_raw(w), to_raw(b), to_raw(out), np.int32(n), np.float32(eps)))
    return out
