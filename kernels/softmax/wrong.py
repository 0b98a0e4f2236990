"""Known-wrong softmax kernels: each keeps one classic bug so tests can assert the checker names it.

- ``wrong_unwritten_rows`` (Numba): a floor-divided grid, so the last rows are never written.
- ``wrong_zero_empty_rows`` and ``wrong_no_max`` (Triton): numerics. ``wrong_no_max`` is the classic: exp(x) without
  subtracting the row max overflows fp32 past x = 88.7, and a row of the checker's edge case holds values near 1e4,
  so it becomes inf / inf = NaN where torch's softmax is finite. The checker tells that NaN from its own poison (a
  payload NaN no arithmetic makes) and says ``computed_nan``, not "unwritten".
- ``wrong_unguarded_warp_slots`` (CUDA C): a block reduction that reads shared memory no thread wrote.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from kernels.softmax._cuda import run
from workbench import empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, numba_supports

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


@triton.jit
def softmax_zero_for_empty_rows(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    base = tl.program_id(0).to(tl.int64) * N
    x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    mx = tl.max(x, axis=0)
    mx = tl.where(mx == -float("inf"), 0.0, mx)  # BUG (for torch semantics): an all -inf row becomes exp(-inf) = 0
    e = tl.exp(x - mx)
    s = tl.sum(e, axis=0)
    y = e / tl.where(s == 0.0, 1.0, s)  # ... and 0 / 1 = 0 instead of torch's NaN
    tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


@register("softmax", "wrong_zero_empty_rows", backend="triton", expected_diagnosis="special_values",
          idea="KNOWN WRONG: guards 0/0 so all -inf rows give 0 (FlashAttention's convention), not torch's NaN.")
def wrong_zero_empty_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    softmax_zero_for_empty_rows[(m,)](x, out, n, BLOCK_N=triton.next_power_of_2(n))
    return out


@triton.jit
def softmax_without_max(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    base = tl.program_id(0).to(tl.int64) * N
    x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)  # BUG: should be tl.exp(x - tl.max(x, axis=0)); exp(89) is already inf in fp32
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


@register("softmax", "wrong_no_max", backend="triton", expected_diagnosis="computed_nan",
          idea="KNOWN WRONG: exp(x) without subtracting the row max: overflows to inf / inf = NaN for large inputs.")
def wrong_no_max(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    with np.errstate(over="ignore", invalid="ignore"):  # the interpreter's numpy would warn of the overflow it shows
        softmax_without_max[(m,)](x, out, n, BLOCK_N=triton.next_power_of_2(n))
    return out


@register("softmax", "wrong_unguarded_warp_slots", backend="cuda", cu_file="wrong_block_slots.cu",
          dtypes=("float32",), expected_diagnosis="uninitialized",
          idea="KNOWN WRONG: a 64-thread block reduction whose warp 0 merges all 32 shared slots, 30 never written.")
def wrong_unguarded_warp_slots(x: torch.Tensor) -> torch.Tensor:
    # The .cu beside this file (an absolute path): a drill runs a copy of both from a folder of its own.
    return run(Path(__file__).parent / "wrong_block_slots.cu", "softmax_unguarded_slots", x, grid=x.shape[0], block=64)
