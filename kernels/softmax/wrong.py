"""Known-wrong softmax kernels: each keeps one classic bug so tests can assert the checker names it."""

from __future__ import annotations

import math

import torch

from workbench import empty_like, register
from workbench._numba import cuda, numba_supports
from workbench.interop import to_numba

ROWS_PER_BLOCK = 8  # one row per thread


@cuda.jit
def softmax_rows(x, out, m, n):
    r = cuda.grid(1)
    if r < m:
        mx = -math.inf
        for j in range(n):
            mx = max(mx, x[r, j])
        s = 0.0
        for j in range(n):
            s += math.exp(x[r, j] - mx)
        for j in range(n):
            out[r, j] = math.exp(x[r, j] - mx) / s


@register("softmax", "wrong_unwritten_rows", backend="numba", expected_diagnosis="unwritten_rows",
          dtypes=("float32",), supports=numba_supports(),
          idea="KNOWN WRONG: launches m // 8 blocks of 8 row-threads (floor), so the last m % 8 rows are skipped.")
def wrong_unwritten_rows(x: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    m, n = x.shape
    blocks = max(1, m // ROWS_PER_BLOCK)  # BUG: should be ceil(m / ROWS_PER_BLOCK)
    softmax_rows[blocks, ROWS_PER_BLOCK](to_numba(x), to_numba(out), m, n)
    return out
