// cuda_coalesced: the same work, but threadIdx.x walks COLUMNS (block 32x8 = 256 threads). A warp now reads one
// a[row, k] (a broadcast) and 32 consecutive b[k, col] (128 B, 4 sectors), and writes 128 contiguous bytes of c.
#include "gemm_common.cuh"

template <typename T>
__device__ void gemm_coalesced(const T* a, const T* b, T* c, int M, int N, int K, bool) {
  int col = blockIdx.x * 32 + threadIdx.x;
  int row = blockIdx.y * 8 + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_f32(a[row * K + k]) * to_f32(b[k * N + col]);
    c[row * N + col] = from_f32<T>(acc);
  }
}
GEMM_EXPORT(sgemm_coalesced, gemm_coalesced, 256)
