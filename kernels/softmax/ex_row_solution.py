import torch
import triton
import triton.language as tl

import workbench as wb


@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    # >>> learner
    #> row = tl.program_id(0)  # noqa: F841  (you will use it)
    #> cols = tl.arange(0, BLOCK_N)  # noqa: F841  BLOCK_N >= N: the whole row at once
    #> # TODO 1: load the row (mask cols < N; what must masked lanes hold so they do not change max or sum?)
    #> # TODO 2: subtract the row max, exponentiate, divide by the sum (in float32)
    #> # TODO 3: store the result in the output's dtype, under the mask
    #> pass
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)  # BLOCK_N >= N: the whole row at once
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # padding lanes: exp(-inf) = 0, so they do not count
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    # <<< learner


def softmax(x: torch.Tensor) -> torch.Tensor:
    # >>> learner
    #> out = wb.empty_like(x)  # poisoned (NaN) under the checker: unwritten elements show up
    out = wb.empty_like(x)
    # <<< learner
    m, n = x.shape
    softmax_row_kernel[(m,)](x, out, n, BLOCK_N=triton.next_power_of_2(n))
    return out
