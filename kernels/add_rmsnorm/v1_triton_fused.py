"""add + RMSNorm in Triton, fused: one program per row reads x and r once and writes the sum and y."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

MAX_N = 2**16  # longest row kept in registers


@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(s_ptr.dtype.element_ty)  # the new residual, rounded to the stream's dtype as torch rounds it
    tl.store(s_ptr + row * N + cols, s, mask=mask)
    s = s.to(tl.float32)  # y normalises the rounded sum, as the unfused pair does
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / N + eps)  # fp32 sum of squares; padding adds 0
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _spec() -> dict:
    return triton_spec(add_rmsnorm_kernel, types={"eps": float}, BLOCK_N=4096, num_warps=8, num_stages=1)


def _supports(shape: dict) -> str | None:
    if shape["N"] > MAX_N:
        return f"add_rmsnorm/triton_fused keeps a whole row in registers: N <= {MAX_N}, got {shape['N']}"
    return None


def launch(kernel, x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,  # noqa: ANN001
           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``kernel`` (add_rmsnorm_kernel's signature) one program per row; return (y, new_residual)."""
    m, n = x.shape
    y, s = empty_like(x), empty_like(x)
    if y.numel() == 0:  # M or N is 0: empty results, as torch gives
        return y, s
    block_n = triton.next_power_of_2(n)
    warps = 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16
    kernel[(m,)](x, residual, w, y, s, n, eps, BLOCK_N=block_n, num_warps=warps)
    return y, s


@register("add_rmsnorm", "triton_fused", backend="triton", inspect_spec=_spec, supports=_supports,
          idea="Triton: one program per row; x and r read once, the sum stored, its fp32 RMS taken, y stored.")
def triton_fused(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                 eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    return launch(add_rmsnorm_kernel, x, residual, w, eps)
