"""Softmax in Numba, naive: one thread per row, three passes over the row (max, sum of exp, write)."""

from __future__ import annotations

import math

import torch

from workbench import empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports
from workbench.registry import CpuLimit

THREADS = 128  # rows per block
# The Numba simulator runs one OS thread per CUDA thread: keep emulated rows short (both numba variants).
CPU_LIMIT = CpuLimit("N", 4096, "the Numba simulator runs one OS thread per CUDA thread")


@cuda.jit
def softmax_three_pass(x, out, m, n):
    r = cuda.grid(1)  # one thread per row
    if r < m:
        mx = float32(-math.inf)
        for j in range(n):  # pass 1: the row max, so exp never overflows
            mx = max(mx, float32(x[r, j]))
        s = float32(0.0)
        for j in range(n):  # pass 2: the sum of exp(x - max); an all -inf row gives NaN, as torch
            s += math.exp(float32(x[r, j]) - mx)
        for j in range(n):  # pass 3: normalise and write (a third read of the row)
            out[r, j] = math.exp(float32(x[r, j]) - mx) / s


@register("softmax", "numba_three_pass", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=CPU_LIMIT,
          idea="Numba: one thread per row, three passes (max, sum, write); each load uncoalesced.")
def numba_three_pass(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if m == 0:  # no rows: a grid of 0 blocks is a launch error (CUDA_ERROR_INVALID_VALUE), so launch nothing
        return out
    softmax_three_pass[(m + THREADS - 1) // THREADS, THREADS](to_numba(x), to_numba(out), m, n)
    return out
