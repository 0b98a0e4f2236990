"""The given parts of the softmax exercises: the kernels around the learner's helpers, and their launches.

- softmax-online (Triton): ``online_kernel`` reads each row in chunks of BLOCK_N and hands every chunk to the
  learner's ``online_update(m, s, x) -> (m, s)``, which folds it into the running max m and the running sum s of
  exp(x - m); a second pass writes exp(x - m) / s. :func:`online_softmax` binds the helper
  (kernels/_triton_hooks.py) and launches one program per row.
- softmax-warp-shuffle (CUDA C): the learner writes ``__device__ float warp_max(float v)`` and ``warp_sum`` as
  source text; the kernel that calls them, ``softmax_warp`` (one warp per row), is :data:`WARP_KERNEL`, the text
  of ``ex_warp_kernel.cuh``, which the exercise's ``SOURCE`` appends to its own. :func:`warp_softmax` compiles a
  source once per text and launches one block of 32 threads per row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._launch import learner_raw_kernel
from kernels._triton_hooks import with_helpers
from workbench.interop import to_raw

BLOCK_N = 64  # small chunks so even short rows take several steps of the recurrence

online_update = None  # the helper online_kernel calls: bound per launch by online_softmax


@triton.jit
def online_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    m = -float("inf")  # max of the chunks seen so far
    s = 0.0  # sum of exp(x - m) over the chunks seen so far
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m, s = online_update(m, s, x)  # the exercise's recurrence
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def online_softmax(online_update: Any, x: torch.Tensor) -> torch.Tensor:
    """Return softmax(x) over its last dim from online_kernel, each chunk folded in by ``online_update``."""
    kernel = with_helpers(online_kernel, "online_softmax", online_update=online_update)
    out = wb.empty_like(x)
    m, n = x.shape
    kernel[(m,)](x, out, n, BLOCK_N=BLOCK_N)
    return out


# ------------------------------------------------------------------------- softmax-warp-shuffle (CUDA C)
WARP_KERNEL = (Path(__file__).parent / "ex_warp_kernel.cuh").read_text()  # after the learner's __device__ helpers

def warp_softmax(source: str, x: torch.Tensor) -> torch.Tensor:
    """Return softmax(x) over its last dim from the ``softmax_warp`` kernel of ``source``: one warp per row."""
    kernel = learner_raw_kernel("warp_softmax", source, "softmax_warp",
                                "your __device__ functions followed by WARP_KERNEL (from kernels.softmax.ex_common)")
    out = wb.empty_like(x)
    m, n = x.shape
    kernel((m,), (32,), (to_raw(x), to_raw(out), np.int32(n)))
    return out
