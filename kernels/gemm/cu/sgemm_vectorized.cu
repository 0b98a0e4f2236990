// cuda_vectorized: cuda_2d_blocktile's 128x128x8 tiling, with every global and shared access 128 bits wide. a is
// stored into shared memory TRANSPOSED (As[k][m]), so a thread's 8 values of a for one k are contiguous and come in
// two LDS.128; b rows likewise. Global loads are float4 (LDG.128) when K and N are multiples of 4 (else a guarded
// scalar path handles the ragged edge). c is written with STG.128.
#include "gemm_common.cuh"

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

template <typename T>
__device__ void gemm_vec(const T* a, const T* b, T* c, int M, int N, int K, bool vec) {
  __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int ar = tid / 2, ak = (tid % 2) * 4;    // a tile 128x8 = 256 float4: one per thread
  const int bk = tid / 32, bc = (tid % 32) * 4;  // b tile 8x128 = 256 float4: one per thread
  float acc[TM][TN] = {{0.0f}};
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    float4 va = load4(a + (size_t)(row0 + ar) * K + k0 + ak, row0 + ar < M ? clamp4(K - k0 - ak) : 0, vec);
    As[(ak + 0) * BM + ar] = va.x;  // 4 scattered STS.32: the transpose costs on the store, pays on every load
    As[(ak + 1) * BM + ar] = va.y;
    As[(ak + 2) * BM + ar] = va.z;
    As[(ak + 3) * BM + ar] = va.w;
    float4 vb = load4(b + (size_t)(k0 + bk) * N + col0 + bc, k0 + bk < K ? clamp4(N - col0 - bc) : 0, vec);
    *reinterpret_cast<float4*>(&Bs[bk * BN + bc]) = vb;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      LDS128(ra, 0, &As[k * BM + trow * TM]);
      LDS128(ra, 4, &As[k * BM + trow * TM + 4]);
      LDS128(rb, 0, &Bs[k * BN + tcol * TN]);
      LDS128(rb, 4, &Bs[k * BN + tcol * TN + 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    int r = row0 + trow * TM + i;
    if (r >= M) break;
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      int q = col0 + tcol * TN + j;
      store4(c + (size_t)r * N + q, ACC4(acc, i, j), clamp4(N - q), vec);
    }
  }
}
GEMM_EXPORT(sgemm_vectorized, gemm_vec, 256)
