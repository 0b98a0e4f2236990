"""Launch the softmax CUDA C kernels, ``kernel(x, out, M, N)``: one extern "C" instance per dtype (``_f32/_f16/_bf16``).

Registers nothing: the CUDA C rungs (``v3_cuda_naive`` ... ``v8_cuda_rows``) and a known-wrong kernel call it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec
from workbench import empty_like
from workbench.interop import to_raw

HERE = Path(__file__).parent


def run(cu: str | Path, base: str, x: torch.Tensor, grid: int, block: int | tuple[int, ...],
        shared_mem: int = 0) -> torch.Tensor:
    """Launch ``kernel(x, out, M, N)`` over ``grid`` blocks of ``block`` threads and return ``out``."""
    out = empty_like(x)
    m, n = x.shape
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives (a row-per-block grid would read past x)
        return out
    cuda_kernel(HERE / cu, base, x.dtype)((max(1, grid),), block if isinstance(block, tuple) else (block,),
                                          (to_raw(x), to_raw(out), np.int32(m), np.int32(n)), shared_mem=shared_mem)
    return out


def spec(cu: str, base: str) -> dict:
    """Return what wb.inspect compiles: the fp32 instance of the kernel."""
    return cuda_spec(HERE / cu, base)
