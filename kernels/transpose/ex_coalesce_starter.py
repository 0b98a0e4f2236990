import numpy as np
import torch

import workbench as wb
from workbench.interop import to_raw

SOURCE = r"""
#define TILE 32
#define ROWS 8

// Correct, but slow: each block moves one 32 x 32 tile straight from x to out. A warp's 32 lanes read 32
// neighbouring floats of one row of x (coalesced), then write them down a column of out, m floats apart.
// TODO: stage the tile in shared memory so that the writes go along rows of out too.
extern "C" __global__ void transpose_tile(const float* x, float* out, int m, int n) {
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int k = 0; k < TILE; k += ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + k;
        if (row < m && col < n) out[(size_t)col * m + row] = x[(size_t)row * n + col];
    }
}
"""
_kernel = None


def transpose(x: torch.Tensor) -> torch.Tensor:
    global _kernel
    if _kernel is None:
        _kernel = wb.cuda.RawKernel(SOURCE, "transpose_tile")
    m, n = x.shape
    out = wb.empty((n, m), x.dtype, x.device)
    if out.numel():
        _kernel(((n + 31) // 32, (m + 31) // 32), (32, 8), (to_raw(x), to_raw(out), np.int32(m), np.int32(n)))
    return out
