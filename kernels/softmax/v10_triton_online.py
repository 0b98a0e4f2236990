"""Softmax in Triton for rows too long for registers: a loop of chunks with the online (max, sum) recurrence."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

BLOCK_N = 4096  # elements per chunk: 16 KB of fp32 in flight per program


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N  # one program per row
    m = -float("inf")  # running max of the chunks so far
    s = 0.0  # running sum of exp(x - m)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)  # only -inf so far: exp(-inf - 0) = 0, not NaN
        s = s * tl.exp(m - ref) + tl.sum(tl.exp(x - ref), axis=0)  # rescale the old sum to the new max
        m = m_new
    # Write pass, last chunk first: the chunks read most recently are the likeliest to still sit in L2.
    n_chunks = tl.cdiv(N, BLOCK_N)
    for k in range(0, n_chunks):
        cols = (n_chunks - 1 - k) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / s  # all -inf row: m = -inf, s = 0 -> NaN, as torch
        tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


def _spec() -> dict:
    return triton_spec(softmax_online_kernel, BLOCK_N=BLOCK_N, num_warps=8, num_stages=2)


@register("softmax", "triton_online", backend="triton", inspect_spec=_spec,
          idea="Triton for long rows: loop over 4K chunks with the online (max, sum), then a reversed write loop.")
def triton_online(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives
        return out
    block = min(BLOCK_N, triton.next_power_of_2(n))
    softmax_online_kernel[(m,)](x, out, n, BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    return out
