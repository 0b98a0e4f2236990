"""Known-wrong rmsnorm kernel: the Triton variant averaging the squares over the wrong axis length.

``wrong_mean_over_rows`` is ``triton_fused``'s kernel with one line changed: the sum of squares along a row is
divided by ``M`` (the number of rows) instead of ``N`` (the row length), the classic mix-up of the two sizes a
kernel receives. Every row's 1/rms comes out sqrt(M / N) times the right one: the same factor for every element,
and 1 only when M == N (the check shape M = N = 1 passes, which is how the bug survives a square test).

What the checker says: ``scale``. eps (1e-6) is tiny next to mean(x^2), so the factor is the same everywhere.
A subtler cousin, dividing by the padded width BLOCK_N, reads as ``precision`` at N = 1023 (BLOCK_N = 1024: a
0.05% factor, below the checker's 1% threshold for calling a factor a scale).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty_like, register


@triton.jit
def rmsnorm_rows_mean_kernel(x_ptr, w_ptr, y_ptr, M, N, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / M + eps)  # BUG: a row has N elements, not M
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@register("rmsnorm", "wrong_mean_over_rows", backend="triton", expected_diagnosis="scale", dtypes=("float32",),
          idea="KNOWN WRONG: divides each row's sum of squares by M (the row count) instead of N (its length).")
def wrong_mean_over_rows(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    block_n = triton.next_power_of_2(n)
    rows = max(1, min(16, 8192 // block_n))
    warps = 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16
    rmsnorm_rows_mean_kernel[(triton.cdiv(m, rows),)](x, w, out, m, n, eps, ROWS=rows, BLOCK_N=block_n,
                                                       num_warps=warps)
    return out
