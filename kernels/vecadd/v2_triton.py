"""vecadd in Triton: one program per BLOCK elements, a vector of offsets and a mask."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty_like, register

BLOCK = 1024  # elements per program: 4 KiB of fp32 per operand


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # lanes past the end neither load nor store
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def _spec() -> dict:
    return triton_spec(add_kernel, BLOCK=BLOCK, num_warps=4, num_stages=1)


@register("vecadd", "triton_block", backend="triton", inspect_spec=_spec,
          idea="One program per 1024-element block; tl.arange offsets and a mask handle the tail.")
def triton_block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
