"""More known-wrong softmax kernels (Triton): numerics bugs the checker must name.

A softmax that forgets the max (exp overflows to inf/inf = NaN on a row near 1e4) is not kept here: the checker
reads a NaN output where the reference is finite as unwritten poison and says "unwritten", which would teach the
wrong lesson.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty_like, register


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

