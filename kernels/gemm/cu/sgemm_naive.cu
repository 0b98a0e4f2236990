// cuda_naive: one thread per c[row, col], with threadIdx.x walking ROWS. The 32 lanes of a warp then read 32
// different rows of a (stride K elements) and write 32 rows of c: every access is its own 32-byte sector.
// Block 16x16 = 256 threads; grid ceil(M/16) x ceil(N/16).
#include "gemm_common.cuh"

template <typename T>
__device__ void gemm_naive(const T* a, const T* b, T* c, int M, int N, int K, bool) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_f32(a[row * K + k]) * to_f32(b[k * N + col]);
    c[row * N + col] = from_f32<T>(acc);
  }
}
GEMM_EXPORT(sgemm_naive, gemm_naive, 256)
