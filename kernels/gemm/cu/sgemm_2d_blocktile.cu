// cuda_2d_blocktile: a 128x128 tile of c per block of 256 threads, each thread an 8x8 micro-tile (64 fp32
// accumulators in registers). Per K step a thread loads 8 values of a and 8 of b from shared memory and does
// 64 FMAs: 0.25 shared loads per FMA (cuda_1d_blocktile: 1.125). Arithmetic intensity of the block tile against global
// memory: 2*128*128*8 FLOP / ((128+128)*8*4 B) = 32 FLOP/B in fp32.
#include "gemm_common.cuh"

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

template <typename T>
__device__ void gemm_2d(const T* a, const T* b, T* c, int M, int N, int K, bool) {
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % (BN / TN), trow = tid / (BN / TN);  // 16 x 16 threads
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {{0.0f}};
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    // 1024 elements per tile, 256 threads: 4 strided loads each.
#pragma unroll
    for (int e = tid; e < BM * BK; e += 256) {
      int r = e / BK, q = e % BK;
      As[e] = (row0 + r < M && k0 + q < K) ? to_f32(a[(row0 + r) * K + k0 + q]) : 0.0f;
      int br = e / BN, bq = e % BN;
      Bs[e] = (k0 + br < K && col0 + bq < N) ? to_f32(b[(k0 + br) * N + col0 + bq]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = As[(trow * TM + i) * BK + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = Bs[k * BN + tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int r = row0 + trow * TM + i, q = col0 + tcol * TN + j;
      if (r < M && q < N) c[r * N + q] = from_f32<T>(acc[i][j]);
    }
}
GEMM_EXPORT(sgemm_2d_blocktile, gemm_2d, 256)
