// cuda_wmma: tensor cores through nvcuda::wmma: fp16/bf16 in, fp32 accumulate. A block of 128 threads (4 warps, 2x2)
// computes 64x64 of c; each warp owns 32x32 = 2x2 fragments of 16x16 and per 16-deep k step issues 4
// mma_sync (each 16x16x16 = 8192 FLOP on the tensor cores: HMMA in SASS). Tiles go through shared memory with
// zero fill, so any M, N, K works; rows are padded by 8 halves (16 B) so fragment loads spread over the banks.
// The accumulators go back through shared memory for a guarded, coalesced store in the input dtype.
#include <mma.h>
#include "gemm_common.cuh"

using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 32
#define APAD 8  // halves: row stride 40 halves = 80 B (a multiple of 16 B, as wmma's ldm requires)
#define BPAD 8
#define CPAD 4

template <typename T>
__device__ void gemm_wmma(const T* a, const T* b, T* c, int M, int N, int K) {
  __shared__ __align__(32) T As[BM][BK + APAD];
  __shared__ __align__(32) T Bs[BK][BN + BPAD];
  __shared__ __align__(32) float Cs[BM][BN + CPAD];
  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  const T zero = from_f32<T>(0.0f);
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 128) {  // 2048 elements of a, 16 per thread, coalesced along K
      int r = e / BK, q = e % BK;
      As[r][q] = (row0 + r < M && k0 + q < K) ? a[(size_t)(row0 + r) * K + k0 + q] : zero;
    }
    for (int e = tid; e < BK * BN; e += 128) {
      int r = e / BN, q = e % BN;
      Bs[r][q] = (k0 + r < K && col0 + q < N) ? b[(size_t)(k0 + r) * N + col0 + q] : zero;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wm + i * 16][kk], BK + APAD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[kk][wn + j * 16], BN + BPAD);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&Cs[wm + i * 16][wn + j * 16], acc[i][j], BN + CPAD, wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < BM * BN; e += 128) {
    int r = e / BN, q = e % BN;
    if (row0 + r < M && col0 + q < N) c[(size_t)(row0 + r) * N + col0 + q] = from_f32<T>(Cs[r][q]);
  }
}

extern "C" __global__ void __launch_bounds__(128)
    hgemm_wmma_f16(const __half* a, const __half* b, __half* c, int M, int N, int K) {
  gemm_wmma<__half>(a, b, c, M, N, K);
}
extern "C" __global__ void __launch_bounds__(128)
    hgemm_wmma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int M, int N, int K) {
  gemm_wmma<__nv_bfloat16>(a, b, c, M, N, K);
}
