// cuda_smem, shared-memory tiles: a 32x32 block (1024 threads) stages a 32x32 tile of a and of b in shared memory per
// K step (2 x 4 KiB in fp32), so each element fetched from global memory is used 32 times instead of once.
#include "gemm_common.cuh"

#define TS 32

template <typename T>
__device__ void gemm_smem(const T* a, const T* b, T* c, int M, int N, int K, bool) {
  __shared__ float As[TS][TS];
  __shared__ float Bs[TS][TS];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    // Coalesced: consecutive tx read consecutive columns. Out-of-range elements load as 0.
    As[ty][tx] = (row < M && k0 + tx < K) ? to_f32(a[row * K + k0 + tx]) : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? to_f32(b[(k0 + ty) * N + col]) : 0.0f;
    __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
    for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];  // As: broadcast; Bs: 32 banks, no conflict
    __syncthreads();  // everyone is done reading before the next iteration overwrites them
  }
  if (row < M && col < N) c[row * N + col] = from_f32<T>(acc);
}
GEMM_EXPORT(sgemm_smem, gemm_smem, 1024)
