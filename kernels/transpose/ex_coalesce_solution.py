import torch

from kernels.transpose.ex_common import TILE_KERNEL, tile_transpose  # the kernel that calls yours, and its launch

SOURCE = r"""
#define TILE 32
#define ROWS 8

// >>> learner
//> // Correct, but slow: each block moves one 32 x 32 tile straight from x to out. A warp's 32 lanes read 32
//> // neighbouring floats of one row of x (coalesced), then write them down a column of out, m floats apart.
//> // TODO: stage the tile in shared memory so that the writes go along rows of out too.
// Read a 32 x 32 tile of x along its rows into shared memory, then write the tile's columns as rows of out:
// both global sides are coalesced. (Reading tile[tx][...] walks down a column of the tile, 32 words apart: a 32-way
// bank conflict. Exercise transpose-bank-conflicts removes it.)
// <<< learner
__device__ void transpose_block(const float* x, float* out, int m, int n) {
    // >>> learner
    //> int col = blockIdx.x * TILE + threadIdx.x;
    __shared__ float tile[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * TILE + tx;
    // <<< learner
    for (int k = 0; k < TILE; k += ROWS) {
        // >>> learner
        //> int row = blockIdx.y * TILE + threadIdx.y + k;
        //> if (row < m && col < n) out[(size_t)col * m + row] = x[(size_t)row * n + col];
        int row = blockIdx.y * TILE + ty + k;
        if (row < m && col < n) tile[ty + k][tx] = x[(size_t)row * n + col];
    }
    __syncthreads();  // every element of the tile is loaded before any thread reads one another thread loaded
    int ocol = blockIdx.y * TILE + tx;  // neighbouring lanes: neighbouring columns of out
    for (int k = 0; k < TILE; k += ROWS) {
        int orow = blockIdx.x * TILE + ty + k;
        if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[tx][ty + k];
        // <<< learner
    }
}
""" + TILE_KERNEL  # transpose_tile: one block of 32 x 8 threads per 32 x 32 tile, calling transpose_block


def transpose(x: torch.Tensor) -> torch.Tensor:
    return tile_transpose(SOURCE, x)
