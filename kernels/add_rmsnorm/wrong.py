"""Known-wrong add_rmsnorm kernel: ``triton_fused``'s kernel with one line changed.

``wrong_eps_outside_sqrt`` divides by ``sqrt(mean(s^2)) + eps`` instead of ``sqrt(mean(s^2) + eps)``, a slip
seen in hand-written norms. The two differ by sqrt(rms^2 + eps) / (rms + eps) - 1, about eps / (2 rms^2), relative:
with eps = 1e-6 and rows of RMS near 1 (the check's planned runs) that is 5e-7, well inside fp32's tolerance, so
every planned run passes. The checker's eps = 0.5 flag run exposes it: 1 / (rms + 0.5) against
1 / sqrt(rms^2 + 0.5), one wrong factor per row (each row has its own rms), new_residual right. So does a row of
small RMS at the default eps (below ~0.15 in fp32), which a drawn probe of one-element rows finds now and then.

What the checker says: ``normalizer`` (each row of y off by its own factor: the op's ``explain`` recognises it,
kernels/add_rmsnorm/reference.py). Without that recognition the generic patterns call it ``scattered``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.add_rmsnorm.v1_triton_fused import launch
from workbench import register


@triton.jit
def add_rmsnorm_eps_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(s_ptr.dtype.element_ty)
    tl.store(s_ptr + row * N + cols, s, mask=mask)
    s = s.to(tl.float32)
    rstd = 1.0 / (tl.sqrt(tl.sum(s * s, axis=0) / N) + eps)  # BUG: eps belongs under the square root
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@register("add_rmsnorm", "wrong_eps_outside_sqrt", backend="triton", expected_diagnosis="normalizer",
          dtypes=("float32",),
          idea="KNOWN WRONG: 1 / (sqrt(mean(s^2)) + eps) instead of 1 / sqrt(mean(s^2) + eps).")
def wrong_eps_outside_sqrt(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                           eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    return launch(add_rmsnorm_eps_kernel, x, residual, w, eps)
