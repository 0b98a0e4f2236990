"""LayerNorm in Triton, fused (tutorial 05's forward): one program per row, fp32 statistics, mean and rstd saved.

The program walks its row in chunks of BLOCK_N three times: the sum (mean), the sum of squares of x - mean (the
biased variance), then y = (x - mean) * rstd * w + b. The second and third reads mostly hit L2, and a row that fits
one chunk is read from DRAM once. :func:`layernorm_fwd` can also return the row's fp32 mean and rstd, which the
backward (``layernorm_bwd``) takes instead of recomputing them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

from .reference import EPS, validate

MAX_BLOCK_N = 4096  # the widest chunk a program loads at once (fp32: 16 KB of registers across its warps)


@triton.jit
def layernorm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * N
    y_ptr += row * N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.0)  # padding would add mean^2 each
        acc += d * d
    var = tl.sum(acc, axis=0) / N  # biased: divide by N
    rstd = 1.0 / tl.sqrt(var + eps)  # eps inside the square root
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch_config(n: int) -> tuple[int, int]:
    """Return (BLOCK_N, num_warps) for rows of ``n`` elements: one chunk up to MAX_BLOCK_N, more warps for wide."""
    block_n = min(MAX_BLOCK_N, triton.next_power_of_2(max(1, n)))
    return block_n, 4 if block_n <= 1024 else 8


def _spec() -> dict:
    return triton_spec(layernorm_fwd_kernel, types={"eps": float, "mean_ptr": torch.float32,
                                                    "rstd_ptr": torch.float32},
                       BLOCK_N=MAX_BLOCK_N, num_warps=8, num_stages=1)


def layernorm_fwd(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS, *,
                  return_stats: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return layernorm(x, w, b, eps), and with ``return_stats`` also each row's fp32 mean[M] and rstd[M].

    The inputs are validated as the contract says (``wb.OpError`` otherwise). The stats are what
    ``layernorm_bwd(dy, x, w, mean, rstd)`` takes.
    """
    validate(x, w, b, eps)
    m, n = x.shape
    out = empty_like(x)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    if out.numel():
        block_n, warps = launch_config(n)
        layernorm_fwd_kernel[(m,)](x, w, b, out, mean, rstd, n, eps, BLOCK_N=block_n, num_warps=warps)
    return (out, mean, rstd) if return_stats else out


@register("layernorm", "triton_fused", backend="triton", inspect_spec=_spec,
          idea="Triton (tutorial 05): a program per row; fp32 sum, then sum of (x - mean)^2, then y; saves mean, rstd.")
def triton_fused(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return layernorm_fwd(x, w, b, eps)
