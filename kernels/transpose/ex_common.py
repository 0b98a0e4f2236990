"""The given part of the two transpose exercises: the kernel around the learner's tile function, and its launch.

The learner writes ``__device__ void transpose_block(const float* x, float* out, int m, int n)`` as CUDA source
text: the block (32 x 8 threads) moves tile (blockIdx.y, blockIdx.x) of x [m, n] into out [n, m]. The kernel
that calls it, ``transpose_tile``, is :data:`TILE_KERNEL` (the text of ``ex_tile_kernel.cuh``), which an
exercise's ``SOURCE`` appends to its own; :func:`tile_transpose` compiles a source once per text and launches it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import workbench as wb
from kernels._launch import learner_raw_kernel
from workbench.interop import to_raw

TILE_KERNEL = (Path(__file__).parent / "ex_tile_kernel.cuh").read_text()  # after the learner's transpose_block

def tile_transpose(source: str, x: torch.Tensor) -> torch.Tensor:
    """Return x.T (a new [n, m] tensor) from the ``transpose_tile`` kernel of ``source``, one block per tile."""
    kernel = learner_raw_kernel("tile_transpose", source, "transpose_tile", "your __device__ transpose_block "
                                "followed by TILE_KERNEL (from kernels.transpose.ex_common)")
    m, n = x.shape
    out = wb.empty((n, m), x.dtype, x.device)
    if out.numel():
        kernel(((n + 31) // 32, (m + 31) // 32), (32, 8), (to_raw(x), to_raw(out), np.int32(m), np.int32(n)))
    return out
