"""The given part of exercise layernorm-bwd-two-stage: LayerNorm backward in Triton, all but its column sum.

Stage 1 (given, complete: ``triton_two_stage``'s kernel) writes dx and each CTA's fp32 partial sums of dw and db
to row ``cta`` of two [num_ctas, N] buffers. Stage 2, :func:`colsum_kernel` here, gives each program BLOCK_N
columns and calls ``sum_partials(part_ptr, cols, R, N, BLOCK_R, BLOCK_N) -> [BLOCK_N] fp32`` once per buffer:
the helper the exercise writes, the sum over the R partial rows of those columns. :func:`two_stage_backward`
binds it (kernels/_triton_hooks.py) and launches both stages.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers
from kernels.layernorm_bwd.v3_triton_two_stage import two_stage

BLOCK_R = BLOCK_N = 32  # 32 partial rows x 32 columns per step of the column sum

sum_partials = None  # the exercise's helper that colsum_kernel calls: bound per launch by two_stage_backward


@triton.jit
def colsum_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, R, N, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per BLOCK_N columns: dw and db of those columns, each the sum of R partial rows.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = sum_partials(dw_part_ptr, cols, R, N, BLOCK_R, BLOCK_N)
    db = sum_partials(db_part_ptr, cols, R, N, BLOCK_R, BLOCK_N)
    tl.store(dw_ptr + cols, dw.to(dw_ptr.dtype.element_ty), mask=cols < N)
    tl.store(db_ptr + cols, db.to(db_ptr.dtype.element_ty), mask=cols < N)


def two_stage_backward(sum_partials: Any, dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                       rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dx, dw, db): stage 1, then colsum_kernel calling ``sum_partials`` for dw's and db's partials."""
    colsum = with_helpers(colsum_kernel, "two_stage_backward", sum_partials=sum_partials)
    dx, dw_part, db_part = two_stage(dy, x, w, mean, rstd)  # partials: [num_ctas, N] fp32, num_ctas = cdiv(M, 32)
    r, n = dw_part.shape
    dw, db = wb.empty_like(w), wb.empty_like(w)
    colsum[(triton.cdiv(n, BLOCK_N),)](dw_part, db_part, dw, db, r, n, BLOCK_R=BLOCK_R, BLOCK_N=BLOCK_N)
    return dx, dw, db
