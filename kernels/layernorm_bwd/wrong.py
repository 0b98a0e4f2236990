"""Known-wrong layernorm_bwd kernel: dw and db reduced over the wrong axis of the per-CTA partials.

``wrong_sum_over_n`` runs the layernorm-bwd-two-stage exercise's kernels (``ex_common.py``'s
``two_stage_backward``: stage 1, then ``colsum_kernel`` calling the helper below) with one token of the
solution's ``sum_partials`` changed: the [BLOCK_R, BLOCK_N] accumulator of partial rows is summed with
``axis=1`` (across the columns: over N) where dw_j = sum over the rows (CTAs, so over M) of the partials at
column j needs ``axis=0``. The tile is square (32 x 32), so the wrong sum still has BLOCK_N entries and stores
without a shape error: entry k of a column block becomes the sum of partial row k (and k + 32, ...) over the
block's 32 columns. dx, computed by stage 1, stays right.

What the checker says: ``scattered``. dw and db are wrong at almost every column, each by its own amount (a sum
of other columns' partials), with no tail, tile or constant-factor pattern; the report names dw and db as the
wrong outputs and dx as right.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.layernorm_bwd.ex_common import two_stage_backward
from workbench import register


@triton.jit
def sum_partials_over_n(part_ptr, cols, R, N, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    """Return the sums over rows 0..R-1 of the fp32 partials part[R, N] at columns ``cols`` ([BLOCK_N] fp32)."""
    acc = tl.zeros((BLOCK_R, BLOCK_N), tl.float32)
    for r0 in range(0, R, BLOCK_R):  # the same chunks in the same order on every run: deterministic
        rows = r0 + tl.arange(0, BLOCK_R)
        ok = (rows[:, None] < R) & (cols[None, :] < N)  # the last chunk of rows and of columns is partial
        acc += tl.load(part_ptr + rows[:, None] * N + cols[None, :], mask=ok, other=0.0)
    return tl.sum(acc, axis=1)  # BUG: dw_j sums over the rows (axis 0), not across the columns


@register("layernorm_bwd", "wrong_sum_over_n", backend="triton", expected_diagnosis="scattered",
          dtypes=("float32",), deterministic=True,
          idea="KNOWN WRONG: the column sum of the per-CTA partials reduces axis 1 (over N) instead of axis 0.")
def wrong_sum_over_n(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return two_stage_backward(sum_partials_over_n, dy, x, w, mean, rstd)
