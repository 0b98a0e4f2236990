// cuda_1d_blocktile: a 64x64 tile of c per block of 512 threads, each thread computing a column of TM = 8
// results. Per shared-memory load of b the thread now does 8 FMAs (cuda_smem: 1), so shared-memory traffic per FMA
// drops from 2 loads to 1.125.
#include "gemm_common.cuh"

#define BM 64
#define BN 64
#define BK 8
#define TM 8

template <typename T>
__device__ void gemm_1d(const T* a, const T* b, T* c, int M, int N, int K, bool) {
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % BN, trow = tid / BN;  // trow 0..7: rows trow*8 .. +8 of the tile
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int ar = tid / BK, ac = tid % BK;  // a tile 64x8: one element per thread
  const int br = tid / BN, bc = tid % BN;  // b tile 8x64: one element per thread
  float acc[TM] = {0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    As[ar * BK + ac] = (row0 + ar < M && k0 + ac < K) ? to_f32(a[(row0 + ar) * K + k0 + ac]) : 0.0f;
    Bs[br * BN + bc] = (k0 + br < K && col0 + bc < N) ? to_f32(b[(k0 + br) * N + col0 + bc]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float bv = Bs[k * BN + tcol];  // one load of b ...
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[(trow * TM + i) * BK + k] * bv;  // ... reused 8 times
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    int r = row0 + trow * TM + i, q = col0 + tcol;
    if (r < M && q < N) c[r * N + q] = from_f32<T>(acc[i]);
  }
}
GEMM_EXPORT(sgemm_1d_blocktile, gemm_1d, 512)
