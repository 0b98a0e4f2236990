import torch
from numba import cuda

import workbench as wb
from workbench.interop import to_numba

THREADS = 256


@cuda.jit
def add_kernel(x, y, out, n):
    i = cuda.grid(1)
    # >>> learner
    #> if i < n:
    if i < n:  # the extra threads of the last block do nothing
    # <<< learner
        out[i] = x[i] + y[i]


def vecadd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = wb.empty_like(x)
    n = x.numel()
    # >>> learner
    #> blocks = max(1, n // THREADS)  # TODO: enough blocks for every element
    blocks = (n + THREADS - 1) // THREADS  # ceil(n / THREADS): 1025 elements -> 5 blocks
    # <<< learner
    add_kernel[blocks, THREADS](to_numba(x), to_numba(y), to_numba(out), n)
    return out
