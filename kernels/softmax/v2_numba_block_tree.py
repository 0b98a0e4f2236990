"""Softmax in Numba, one block per row: threads stride over the row and meet in a shared-memory tree."""

from __future__ import annotations

import math

import torch

from workbench import MODE, empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports

from .v1_numba_three_pass import CPU_LIMIT

# A power of two: the tree halves it log2(THREADS) times. cpu mode uses one warp's worth: the simulator runs
# each CUDA thread as an OS thread, and 128 of them per row make the default check take ~45 s.
THREADS = 128 if MODE == "gpu" else 32


@cuda.jit
def softmax_block_tree(x, out, n):
    r = cuda.blockIdx.x  # one block per row
    t = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, float32)  # one fp32 slot per thread: 512 B

    mx = float32(-math.inf)
    for j in range(t, n, THREADS):  # neighbouring threads read neighbouring elements: coalesced
        mx = max(mx, float32(x[r, j]))
    buf[t] = mx
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:  # tree: THREADS -> THREADS/2 -> ... -> 1 partial maxima
        if t < stride:
            buf[t] = max(buf[t], buf[t + stride])
        cuda.syncthreads()  # this level done before the next reads it
        stride //= 2
    mx = buf[0]
    cuda.syncthreads()  # everyone has read buf[0] before the sum overwrites buf

    s = float32(0.0)
    for j in range(t, n, THREADS):
        s += math.exp(float32(x[r, j]) - mx)
    buf[t] = s
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            buf[t] += buf[t + stride]
        cuda.syncthreads()
        stride //= 2
    s = buf[0]

    for j in range(t, n, THREADS):
        out[r, j] = math.exp(float32(x[r, j]) - mx) / s


@register("softmax", "numba_block_tree", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(), cpu_limit=CPU_LIMIT,
          idea="Numba: one block per row, coalesced strided loads, shared-memory tree reductions for max and sum.")
def numba_block_tree(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if m == 0:  # no rows: a grid of 0 blocks is a launch error (CUDA_ERROR_INVALID_VALUE), so launch nothing
        return out
    softmax_block_tree[m, THREADS](to_numba(x), to_numba(out), n)
    return out
