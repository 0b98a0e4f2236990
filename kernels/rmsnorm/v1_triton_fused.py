"""RMSNorm in Triton, fused: ROWS whole rows per program; sum of squares, scale and weight in one pass."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

MAX_N = 2**16  # longest row kept in registers


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # padding 0 adds nothing to the sum
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)  # w read once per program, reused ROWS x
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)  # fp32 sum of squares
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _spec() -> dict:
    return triton_spec(rmsnorm_kernel, types={"eps": float}, ROWS=2, BLOCK_N=4096, num_warps=8, num_stages=1)


def _supports(shape: dict) -> str | None:
    if shape["N"] > MAX_N:
        return f"rmsnorm/triton_fused keeps a whole row in registers: N <= {MAX_N}, got {shape['N']}"
    return None


@register("rmsnorm", "triton_fused", backend="triton", inspect_spec=_spec, supports=_supports,
          idea="Triton: ROWS whole rows per program in registers; fp32 sum of squares, scale, weight: one pass.")
def triton_fused(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives
        return out
    block_n = triton.next_power_of_2(n)
    rows = max(1, min(16, 8192 // block_n))  # ~8K elements per program
    warps = 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16
    rmsnorm_kernel[(triton.cdiv(m, rows),)](x, w, out, m, n, eps, ROWS=rows, BLOCK_N=block_n, num_warps=warps)
    return out
