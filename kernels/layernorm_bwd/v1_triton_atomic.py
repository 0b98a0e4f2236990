"""LayerNorm backward in Triton, dw/db by atomics: each program adds its partial sums into one fp32 row.

Each program owns ROWS_PER_CTA rows: it stores their dx and keeps fp32 partial sums of dw and db in registers,
then adds them into the fp32 accumulators [N] with ``tl.atomic_add``, one atomic per column per program; a cast
to w's dtype follows. Simple and one pass over dy and x, but not deterministic on a GPU: the programs' adds land
in the order the hardware schedules them, and fp32 addition is not associative, so the low bits of dw and db can
change from run to run (dx never does: it is row-local). Under the interpreter the programs run one after another,
always in the same order, which hides this.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels.layernorm_bwd.triton_rows import ROWS_PER_CTA, row_backward, row_block, supports_n
from workbench import empty, empty_like, register


@triton.jit
def ln_bwd_atomic_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dw_acc_ptr, db_acc_ptr, M, N,
                         ROWS_PER_CTA: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)  # read once per program
    dw = tl.zeros((BLOCK_N,), tl.float32)
    db = tl.zeros((BLOCK_N,), tl.float32)
    row0 = tl.program_id(0) * ROWS_PER_CTA
    for row in range(row0, tl.minimum(row0 + ROWS_PER_CTA, M)):
        dw_row, db_row = row_backward(dx_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, w, row, cols, mask, N)
        dw += dw_row
        db += db_row
    tl.atomic_add(dw_acc_ptr + cols, dw, mask=mask)  # the order of these adds across programs is not fixed
    tl.atomic_add(db_acc_ptr + cols, db, mask=mask)


def _spec() -> dict:
    return triton_spec(ln_bwd_atomic_kernel, "bf16", types={"mean_ptr": torch.float32, "rstd_ptr": torch.float32,
                                                            "dw_acc_ptr": torch.float32, "db_acc_ptr": torch.float32},
                       ROWS_PER_CTA=ROWS_PER_CTA, BLOCK_N=4096, num_warps=8, num_stages=1)


@register("layernorm_bwd", "triton_atomic", backend="triton", inspect_spec=_spec, supports=supports_n("triton_atomic"),
          deterministic=False,
          idea="Triton: dx per row; each program's fp32 partial dw/db added with tl.atomic_add (order varies by run).")
def triton_atomic(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                  rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    dx = empty_like(x)
    dw_acc = empty((n,), torch.float32, x.device).zero_()  # atomics add into it: it must start at 0
    db_acc = empty((n,), torch.float32, x.device).zero_()
    if m:
        block_n, warps = row_block(n)
        ln_bwd_atomic_kernel[(triton.cdiv(m, ROWS_PER_CTA),)](dx, dy, x, w, mean, rstd, dw_acc, db_acc, m, n,
                                                             ROWS_PER_CTA=ROWS_PER_CTA, BLOCK_N=block_n,
                                                             num_warps=warps)
    return dx, dw_acc.to(w.dtype), db_acc.to(w.dtype)
