"""Known-wrong vecadd kernels: each keeps one classic bug so tests can assert the checker names it."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty_like, register
from workbench._numba import cuda, numba_supports
from workbench.interop import to_numba

BLOCK = 256


@triton.jit
def add_off_by_one(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1  # BUG: off by one, the last element is never stored
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@register("vecadd", "wrong_off_by_one_mask", backend="triton", expected_diagnosis="masking",
          idea="KNOWN WRONG: the mask is `offs < n - 1`, so the last element is never written.")
def wrong_off_by_one_mask(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    add_off_by_one[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


@cuda.jit
def add_kernel(x, y, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] + y[i]


@register("vecadd", "wrong_dropped_tail", backend="numba", expected_diagnosis="masking", dtypes=("float32",),
          supports=numba_supports(),
          idea="KNOWN WRONG: launches n // 256 blocks (floor), dropping the partial last block.")
def wrong_dropped_tail(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    blocks = max(1, n // BLOCK)  # BUG: should be ceil(n / BLOCK)
    add_kernel[blocks, BLOCK](to_numba(x), to_numba(y), to_numba(out), n)
    return out
