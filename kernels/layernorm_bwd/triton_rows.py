"""The part every Triton layernorm_bwd variant shares: dx of one row, and what that row adds to dw and db.

Triton tutorial 05's backward, cut at the point where the variants differ. A program walks its rows one at a
time, the whole row in registers (``BLOCK_N = next_power_of_2(N)`` columns, the padding masked), calls
:func:`row_backward` for each and adds the two vectors it returns into its own fp32 accumulators. What happens to
those per-program partial sums of dw and db is each variant's business: atomics, a lock-guarded group buffer, or a
[num_ctas, N] buffer summed by a second kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import MODE

MAX_N = 16384  # the longest row a program keeps in registers (dx, x, dy, w and two accumulators of BLOCK_N)
ROWS_PER_CTA = 32  # rows per program of the atomic and two-stage variants: fixed, never derived from the SM count


@triton.jit
def row_backward(dx_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, w, row, cols, mask, N):
    """Store dx of ``row``; return its dy * xhat and dy (fp32 [BLOCK_N], 0 past N): its share of dw and db.

    ``w`` is the weight in fp32, loaded once by the caller (0 past N).
    """
    offs = tl.cast(row, tl.int64) * N + cols  # int64: M * N may pass 2^31
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)  # the padding must not enter the row sums
    g = w * dy  # dL/dxhat
    c1 = tl.sum(xhat * g, axis=0) / N  # mean_j(g * xhat)
    c2 = tl.sum(g, axis=0) / N  # mean_j(g)
    dx = (g - (xhat * c1 + c2)) * rstd
    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    return dy * xhat, dy


def row_block(n: int) -> tuple[int, int]:
    """Return (BLOCK_N, num_warps) for rows of ``n`` elements held whole in registers."""
    block_n = triton.next_power_of_2(n)
    return block_n, 4 if block_n <= 1024 else 8 if block_n <= 4096 else 16


def supports_n(who: str):
    """Return a ``supports`` function refusing rows longer than :data:`MAX_N` for variant ``who``."""
    def supports(shape: dict) -> str | None:
        if shape["N"] > MAX_N:
            return (f"layernorm_bwd/{who} keeps a whole row in registers: N <= {MAX_N}, got {shape['N']} "
                    "(a longer row needs a loop over column chunks and a second pass for dx)")
        return None

    return supports


@triton.jit
def column_sum_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, R, N,
                      BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per BLOCK_N columns sums R rows of the fp32 partials [R, N] for dw and db, always in the same
    # order (row chunks 0, BLOCK_R, ...; then one tl.sum tree over the chunk axis): the same bits on every run.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    dw = tl.zeros((BLOCK_R, BLOCK_N), tl.float32)
    db = tl.zeros((BLOCK_R, BLOCK_N), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ok = (rows[:, None] < R) & col_ok[None, :]
        offs = rows[:, None].to(tl.int64) * N + cols[None, :]
        dw += tl.load(dw_part_ptr + offs, mask=ok, other=0.0)
        db += tl.load(db_part_ptr + offs, mask=ok, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_ok)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_ok)


# Column-sum tiles: 32 partial rows x 128 columns (16 KiB of fp32 per tensor) on a GPU; 32 x 32 under the
# interpreter, where a program costs ~1 ms whatever its width.
SUM_BLOCK_R = 32
SUM_BLOCK_N = 128 if MODE == "gpu" else 32


def column_sums(dw_part: torch.Tensor, db_part: torch.Tensor, dw: torch.Tensor, db: torch.Tensor) -> None:
    """Write the column sums of the fp32 partials [R, N] into dw and db (w's dtype), in a fixed order."""
    r, n = dw_part.shape
    column_sum_kernel[(triton.cdiv(n, SUM_BLOCK_N),)](dw_part, db_part, dw, db, r, n, BLOCK_R=SUM_BLOCK_R,
                                                       BLOCK_N=SUM_BLOCK_N, num_warps=4)
