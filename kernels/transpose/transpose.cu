// Transpose in CUDA C, three ways: out[j, i] = x[i, j] for x[m, n] row-major, out[n, m] row-major.
// Every kernel: 32 x 8 threads per block, one 32 x 32 tile of x per block, each thread moving 4 elements
// (rows ty, ty + 8, ty + 16, ty + 24 of the tile). Grid: ceil(n / 32) x ceil(m / 32).
#define TILE 32
#define ROWS 8

// Naive: read x along rows (a warp = 32 neighbouring columns: 128 contiguous bytes), write out along its columns
// (neighbouring lanes m floats apart): every warp store touches 32 sectors.
extern "C" __global__ void transpose_naive_f32(const float* __restrict__ x, float* __restrict__ out, int m, int n) {
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int k = 0; k < TILE; k += ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + k;
        if (row < m && col < n) out[(size_t)col * m + row] = x[(size_t)row * n + col];
    }
}

// Shared-memory tile: read a tile of x along its rows, then write the tile's columns as rows of out, so both global
// sides are coalesced. Reading tile[tx][...] walks a column of the tile: 32 lanes 32 words apart all hit one bank
// (a 32-way bank conflict: 32 shared wavefronts per warp read).
extern "C" __global__ void transpose_smem_f32(const float* __restrict__ x, float* __restrict__ out, int m, int n) {
    __shared__ float tile[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * TILE + tx;
    for (int k = 0; k < TILE; k += ROWS) {
        int row = blockIdx.y * TILE + ty + k;
        if (row < m && col < n) tile[ty + k][tx] = x[(size_t)row * n + col];
    }
    __syncthreads();  // the whole tile is loaded before any thread reads another thread's element
    int ocol = blockIdx.y * TILE + tx;  // a column of out = a row of x
    for (int k = 0; k < TILE; k += ROWS) {
        int orow = blockIdx.x * TILE + ty + k;  // a row of out = a column of x
        if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[tx][ty + k];
    }
}

// Padded tile: one extra column makes a row of the tile 33 words long, so the 32 words of a tile column sit in 32
// different banks (bank = (33 * tx + c) mod 32 = (tx + c) mod 32): one wavefront per warp read, no conflict.
extern "C" __global__ void transpose_padded_f32(const float* __restrict__ x, float* __restrict__ out, int m, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * TILE + tx;
    for (int k = 0; k < TILE; k += ROWS) {
        int row = blockIdx.y * TILE + ty + k;
        if (row < m && col < n) tile[ty + k][tx] = x[(size_t)row * n + col];
    }
    __syncthreads();
    int ocol = blockIdx.y * TILE + tx;
    for (int k = 0; k < TILE; k += ROWS) {
        int orow = blockIdx.x * TILE + ty + k;
        if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile[tx][ty + k];
    }
}
