"""vecadd in Numba: one thread per element, the grid rounded up and the tail masked."""

from __future__ import annotations

import torch

from workbench import empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, numba_supports

THREADS = 256  # 8 warps per block


@cuda.jit
def add_kernel(x, y, out, n):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    if i < n:  # the last block is partial when n % THREADS != 0
        out[i] = x[i] + y[i]


@register("vecadd", "numba_grid", backend="numba", dtypes=("float32", "float16"), supports=numba_supports(),
          idea="One thread per element; ceil(n/256) blocks; `if i < n` masks the partial last block.")
def numba_grid(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    blocks = (n + THREADS - 1) // THREADS
    add_kernel[blocks, THREADS](to_numba(x), to_numba(y), to_numba(out), n)
    return out
