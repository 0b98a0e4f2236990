import torch
import triton
import triton.language as tl

import workbench as wb


@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)  # noqa: F841  (you will use it)
    cols = tl.arange(0, BLOCK_N)  # noqa: F841  BLOCK_N >= N: the whole row at once
    # TODO 1: load the row (mask cols < N; what must masked lanes hold so they do not change max or sum?)
    # TODO 2: subtract the row max, exponentiate, divide by the sum (in float32)
    # TODO 3: store the result in the output's dtype, under the mask
    pass


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = wb.empty_like(x)  # poisoned (NaN) under the checker: unwritten elements show up
    m, n = x.shape
    softmax_row_kernel[(m,)](x, out, n, BLOCK_N=triton.next_power_of_2(n))
    return out
