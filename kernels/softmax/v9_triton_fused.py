"""Softmax in Triton, fused: a program loads ROWS whole rows into registers, reduces, and writes once."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

MAX_N = 2**15  # longest row kept in registers (128 KB of fp32 per program); longer rows: triton_online


@triton.jit
def softmax_fused_kernel(x_ptr, y_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # this program's ROWS rows
    cols = tl.arange(0, BLOCK_N)  # BLOCK_N = next power of two >= N: the whole row
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)  # padding is -inf: exp -> 0
    mx = tl.max(x, axis=1)  # all -inf row: mx = -inf, x - mx = NaN, as torch
    e = tl.exp(x - mx[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch_params(n: int) -> tuple[int, int, int]:
    """Return (ROWS, BLOCK_N, num_warps): ~8K elements per program, one row per program past 8K."""
    block_n = triton.next_power_of_2(n)
    rows = max(1, min(16, 8192 // block_n))
    warps = 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16
    return rows, block_n, warps


def _spec() -> dict:
    rows, block_n, warps = launch_params(4096)
    return triton_spec(softmax_fused_kernel, ROWS=rows, BLOCK_N=block_n, num_warps=warps, num_stages=1)


def _supports(shape: dict) -> str | None:
    if shape["N"] > MAX_N:
        return f"softmax/triton_fused keeps a whole row in registers: N <= {MAX_N}, got {shape['N']} (triton_online)"
    return None


@register("softmax", "triton_fused", backend="triton", inspect_spec=_spec, supports=_supports,
          idea="Triton: ROWS whole rows per program in registers; max, exp, sum, divide fused: one read, one write.")
def triton_fused(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives
        return out
    rows, block_n, warps = launch_params(n)
    softmax_fused_kernel[(triton.cdiv(m, rows),)](x, out, m, n, ROWS=rows, BLOCK_N=block_n, num_warps=warps)
    return out
