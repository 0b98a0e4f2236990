import torch

from kernels.transpose.ex_common import TILE_KERNEL, tile_transpose  # the kernel that calls yours, and its launch

SOURCE = r"""
#define TILE 32
#define ROWS 8

// >>> learner
//> // Correct, but slow: a 32 x 32 tile staged in shared memory, so that both global sides are coalesced. But a
//> // warp reading tile[tx][...] walks down a column of the tile, its 32 lanes 32 words apart, all in one bank.
//> // TODO: lay the tile out so that a column of it spans all 32 banks (and a row still does).
// The shared tile padded by one column: a row of it is 33 words long, so the 32 words of one tile column sit in
// banks (33 * tx + c) mod 32 = (tx + c) mod 32: all 32 different, one wavefront per warp read. A row still spans
// all 32 banks, so the stores into the tile stay conflict-free too.
// <<< learner
__device__ void transpose_block(const float* x, float* out, int m, int n) {
    // >>> learner
    //> __shared__ float tile[TILE][TILE];
    //> int tx = threadIdx.x, ty = threadIdx.y;
    //> int col = blockIdx.x * TILE + tx;
    //> for (int k = 0; k < TILE; k += ROWS) {
    //>     int row = blockIdx.y * TILE + ty + k;
    //>     if (row < m && col < n) tile[ty + k][tx] = x[(size_t)row * n + col];
    //> }
    //> __syncthreads();  // every element of the tile is loaded before any thread reads one another thread loaded
    //> int ocol = blockIdx.y * TILE + tx;  // neighbouring lanes: neighbouring columns of out
    //> for (int k = 0; k < TILE; k += ROWS) {
    //>     int orow = blockIdx.x * TILE + ty + k;
    //>     if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[tx][ty + k];
    //> }
    __shared__ float tile[TILE][TILE + 1];  // + 1: the padding column, never read
    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * TILE + tx;
    for (int k = 0; k < TILE; k += ROWS) {
        int row = blockIdx.y * TILE + ty + k;
        if (row < m && col < n) tile[ty + k][tx] = x[(size_t)row * n + col];
    }
    __syncthreads();  // every element of the tile is loaded before any thread reads one another thread loaded
    int ocol = blockIdx.y * TILE + tx;  // neighbouring lanes: neighbouring columns of out
    for (int k = 0; k < TILE; k += ROWS) {
        int orow = blockIdx.x * TILE + ty + k;
        if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[tx][ty + k];
    }
    // <<< learner
}
""" + TILE_KERNEL  # transpose_tile: one block of 32 x 8 threads per 32 x 32 tile, calling transpose_block


def transpose(x: torch.Tensor) -> torch.Tensor:
    return tile_transpose(SOURCE, x)
