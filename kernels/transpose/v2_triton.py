"""Transpose in Triton: one program per tile; the compiler stages the tile through shared memory itself."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty, register

BLOCK = 32


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    rows = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    # out[cols, rows]: write the transposed tile; Triton picks a layout per side and converts between them
    tl.store(out_ptr + cols[:, None] * M + rows[None, :], tl.trans(tile), mask=tl.trans(mask))


@register("transpose", "triton_tile", backend="triton", bf16_dot=False,
          idea="One program per 32x32 tile: load it, tl.trans it, store it; the layout change is the compiler's job.")
def triton_tile(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty((n, m), x.dtype, x.device)
    if out.numel() == 0:
        return out
    transpose_kernel[(triton.cdiv(n, BLOCK), triton.cdiv(m, BLOCK))](x, out, m, n, BLOCK=BLOCK)
    return out
