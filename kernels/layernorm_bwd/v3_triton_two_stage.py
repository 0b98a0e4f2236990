"""LayerNorm backward in Triton, dw/db in two stages without atomics: deterministic.

Stage 1: program c owns rows [c * ROWS_PER_CTA, (c + 1) * ROWS_PER_CTA): it stores their dx and writes its fp32
partial sums of dw and db to row c of two [num_ctas, N] buffers, each element written by one program only.
Stage 2 (:func:`kernels.layernorm_bwd.triton_rows.column_sum_kernel`): one program per column block sums the
num_ctas partial rows in a fixed order and rounds once to w's dtype.

Every add happens in an order fixed by the code, so the same inputs give the same bits on every run. QuACK's and
Liger's norm backwards work the same way but size the partials by the SM count ([sm_count, N], summed by torch),
so which rows share a partial, and so the bits of dw, depend on the GPU. Here the number of CTAs comes from a
fixed ROWS_PER_CTA (32): row i always lands in CTA i // 32, summed in the same order whatever GPU runs it, and
dx (row-local) is batch-invariant. The price is the partials:
2 * num_ctas * N * 4 bytes written and read again: at 32 rows per CTA, 1/16 of the bytes of dy and x in bf16
(M * N / 4 against 4 * M * N), 1/32 in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels.layernorm_bwd.triton_rows import ROWS_PER_CTA, column_sums, row_backward, row_block, supports_n
from workbench import empty, empty_like, register


@triton.jit
def ln_bwd_partials_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dw_part_ptr, db_part_ptr, M, N,
                           ROWS_PER_CTA: tl.constexpr, BLOCK_N: tl.constexpr):
    cta = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), tl.float32)
    db = tl.zeros((BLOCK_N,), tl.float32)
    row0 = cta * ROWS_PER_CTA
    for row in range(row0, tl.minimum(row0 + ROWS_PER_CTA, M)):  # the last CTA may hold fewer rows
        dw_row, db_row = row_backward(dx_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, w, row, cols, mask, N)
        dw += dw_row
        db += db_row
    part = cta.to(tl.int64) * N + cols  # row `cta` of the [num_ctas, N] partials: this program's alone
    tl.store(dw_part_ptr + part, dw, mask=mask)
    tl.store(db_part_ptr + part, db, mask=mask)


def _spec() -> dict:
    return triton_spec(ln_bwd_partials_kernel, "bf16",
                       types={"mean_ptr": torch.float32, "rstd_ptr": torch.float32, "dw_part_ptr": torch.float32,
                              "db_part_ptr": torch.float32},
                       ROWS_PER_CTA=ROWS_PER_CTA, BLOCK_N=4096, num_warps=8, num_stages=1)


def two_stage(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
              rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run stage 1; return (dx, dw_part, db_part), the partials [num_ctas, N] in fp32."""
    m, n = x.shape
    ctas = triton.cdiv(m, ROWS_PER_CTA)
    dx = empty_like(x)
    dw_part = empty((ctas, n), torch.float32, x.device)  # every element written by stage 1: no zeroing needed
    db_part = empty((ctas, n), torch.float32, x.device)
    if ctas:
        block_n, warps = row_block(n)
        ln_bwd_partials_kernel[(ctas,)](dx, dy, x, w, mean, rstd, dw_part, db_part, m, n,
                                        ROWS_PER_CTA=ROWS_PER_CTA, BLOCK_N=block_n, num_warps=warps)
    return dx, dw_part, db_part


@register("layernorm_bwd", "triton_two_stage", backend="triton", inspect_spec=_spec,
          supports=supports_n("triton_two_stage"), deterministic=True,
          idea="Triton: dx per row; per-CTA fp32 partials [M/32, N], then a fixed-order column sum: deterministic.")
def triton_two_stage(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dw_part, db_part = two_stage(dy, x, w, mean, rstd)
    dw, db = empty_like(w), empty_like(w)
    column_sums(dw_part, db_part, dw, db)  # M = 0: zero partial rows, so dw = db = 0
    return dx, dw, db
