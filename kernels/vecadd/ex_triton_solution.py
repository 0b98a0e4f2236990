import torch
import triton
import triton.language as tl

import workbench as wb

BLOCK = 256


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # this program's BLOCK element indices
    mask = offs < n  # the last program is partial when n % BLOCK != 0
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def vecadd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = wb.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
