"""Known-wrong layernorm kernels: ``triton_fused``'s kernel (``layernorm_fwd_kernel``) with one line changed each.

* ``wrong_eps_outside_sqrt``: ``rstd = 1 / sqrt(var) + eps``. On a row of equal values the variance is exactly 0,
  1 / sqrt(0) is inf and (x - mean) * inf is 0 * inf = NaN where the contract gives y = b: the checker says
  ``computed_nan`` (the ``constant`` case). On ordinary rows the error is only about eps, and at the large eps = 0.5
  a flag probe would also catch it, since 1/sqrt(var) + 0.5 is far from 1/sqrt(var + 0.5).
* ``wrong_unbiased_variance``: divides the sum of squares by N - 1 (``torch.var``'s default, Bessel's correction)
  instead of N. Every normalised value (y - b) / w shrinks by sqrt((N - 1) / N): 3% at N = 17, 0.012% at N = 4097,
  and at N = 1 the variance is 0 / 0 = NaN. The checker says ``scale``: the contract's ``explain`` finds one factor
  that maps the reference's y - b onto the kernel's in every finite row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty_like, register

from .reference import EPS
from .v4_triton_fused import launch_config


@triton.jit
def layernorm_eps_outside_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
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
    var = tl.sum(acc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var) + eps  # BUG: eps belongs inside the square root
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


@triton.jit
def layernorm_unbiased_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
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
    var = tl.sum(acc, axis=0) / (N - 1)  # BUG: layer_norm's variance is biased: divide by N
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


def _launch(kernel: triton.JITFunction, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
            eps: float) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    if out.numel():
        block_n, warps = launch_config(n)
        kernel[(m,)](x, w, b, out, mean, rstd, n, eps, BLOCK_N=block_n, num_warps=warps)
    return out


@register("layernorm", "wrong_eps_outside_sqrt", backend="triton", expected_diagnosis="computed_nan",
          dtypes=("float32",), idea="KNOWN WRONG: rstd = 1/sqrt(var) + eps: a row of equal values gives 0 * inf = NaN.")
def wrong_eps_outside_sqrt(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return _launch(layernorm_eps_outside_kernel, x, w, b, eps)


@register("layernorm", "wrong_unbiased_variance", backend="triton", expected_diagnosis="scale",
          dtypes=("float32",), idea="KNOWN WRONG: the variance divides by N - 1 (unbiased), layer_norm's by N.")
def wrong_unbiased_variance(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return _launch(layernorm_unbiased_kernel, x, w, b, eps)
