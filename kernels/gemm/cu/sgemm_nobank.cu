// cuda_nobank: cuda_vectorized has two shared-memory bank conflicts. (1) Storing a transposed: lanes 2t and 2t+1
// write As[ak*128 + ar] with ak = 0 and 4, and 4*128 floats is a multiple of 32 banks: a 2-way conflict on every
// store. Padding each As row to 128 + 4 floats moves the ak = 4 half 16 banks over (4*132 % 32 = 16).
// (2) Reading b: in cuda_vectorized lane t reads 8 contiguous floats at t*8, so the 8 lanes of one LDS.128 phase
// span 64 floats and lanes t and t+4 hit the same banks (2-way). Here each thread owns two 4-wide column groups, at
// tcol*4 and tcol*4 + 64 (likewise rows), so a phase of 8 lanes reads 32 contiguous floats: all 32 banks once.
#include "gemm_common.cuh"

#define BM 128
#define BN 128
#define BK 8
#define PAD 4  // floats: keeps rows 16-byte aligned for LDS.128

template <typename T>
__device__ void gemm_nobank(const T* a, const T* b, T* c, int M, int N, int K, bool vec) {
  __shared__ __align__(16) float As[BK * (BM + PAD)];
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % 16, trow = tid / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int ar = tid / 2, ak = (tid % 2) * 4;
  const int bk = tid / 32, bc = (tid % 32) * 4;
  float acc[8][8] = {{0.0f}};
  float ra[8], rb[8];
  for (int k0 = 0; k0 < K; k0 += BK) {
    float4 va = load4(a + (size_t)(row0 + ar) * K + k0 + ak, row0 + ar < M ? clamp4(K - k0 - ak) : 0, vec);
    As[(ak + 0) * (BM + PAD) + ar] = va.x;
    As[(ak + 1) * (BM + PAD) + ar] = va.y;
    As[(ak + 2) * (BM + PAD) + ar] = va.z;
    As[(ak + 3) * (BM + PAD) + ar] = va.w;
    float4 vb = load4(b + (size_t)(k0 + bk) * N + col0 + bc, k0 + bk < K ? clamp4(N - col0 - bc) : 0, vec);
    *reinterpret_cast<float4*>(&Bs[bk * BN + bc]) = vb;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float* as = &As[k * (BM + PAD)];
      LDS128(ra, 0, &as[trow * 4]);
      LDS128(ra, 4, &as[trow * 4 + 64]);
      LDS128(rb, 0, &Bs[k * BN + tcol * 4]);
      LDS128(rb, 4, &Bs[k * BN + tcol * 4 + 64]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
  // acc[i][j]: row trow*4 + (i%4) + 64*(i/4), column tcol*4 + (j%4) + 64*(j/4).
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int r = row0 + trow * 4 + (i % 4) + 64 * (i / 4);
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; j += 4) {
      int q = col0 + tcol * 4 + 64 * (j / 4);
      store4(c + (size_t)r * N + q, ACC4(acc, i, j), clamp4(N - q), vec);
    }
  }
}
GEMM_EXPORT(sgemm_nobank, gemm_nobank, 256)
