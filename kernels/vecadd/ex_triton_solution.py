import torch
import triton
import triton.language as tl

import workbench as wb

BLOCK = 256


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # >>> learner
    #> pid = tl.program_id(0)  # noqa: F841  (you will use it)
    #> # TODO 1: offs = the BLOCK element indices of this program
    #> # TODO 2: mask = which of them exist (are < n)
    #> # TODO 3: load x and y under the mask, store x + y to out_ptr under the mask
    #> pass
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # this program's BLOCK element indices
    mask = offs < n  # the last program is partial when n % BLOCK != 0
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
    # <<< learner


def vecadd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # >>> learner
    #> out = wb.empty_like(x)  # poisoned (NaN) under the checker: unwritten elements show up
    out = wb.empty_like(x)
    # <<< learner
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
