// cuda_warptile: a third level of tiling between the block and the thread. A block of 128 threads (4 warps,
// 2x2) computes 128x128 of c; each warp owns a 64x64 warp tile, which it sweeps in WNITER = 4 sub-tiles of
// 64x16; each thread computes 8x4 per sub-tile, 128 accumulators in all. Keeping a warp's reads inside its own
// warp tile makes shared-memory access patterns predictable and lets the compiler schedule the 128 FMAs per k
// around 6 LDS.128 (ra: 2, rb: 4: 8 + 16 floats per k). BK = 16 halves the barriers per FMA against cuda_nobank.
// This is the shape of CUTLASS's SIMT SGEMM (siboehm's kernel 10 reaches ~94% of cuBLAS at 4096^2 on an A6000).
#include "gemm_common.cuh"

#define BM 128
#define BN 128
#define BK 16
#define WM 64
#define WN 64
#define WNITER 4
#define TM 8
#define TN 4
#define WSUBN (WN / WNITER)  // 16
#define PAD 4
#define NT 128

template <typename T>
__device__ void gemm_warptile(const T* a, const T* b, T* c, int M, int N, int K, bool vec) {
  __shared__ __align__(16) float As[BK * (BM + PAD)];  // transposed, padded (see sgemm_nobank.cu)
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wrow = warp / 2, wcol = warp % 2;
  const int trw = lane / (WSUBN / TN), tcw = lane % (WSUBN / TN);  // 8 x 4 lanes per sub-tile
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][WNITER * TN] = {{0.0f}};
  float ra[TM], rb[WNITER * TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    // a tile 128x16 and b tile 16x128: 512 float4 each, 4 per thread.
#pragma unroll
    for (int e = tid; e < BM * BK / 4; e += NT) {
      int ar = e / (BK / 4), ak = (e % (BK / 4)) * 4;
      float4 va = load4(a + (size_t)(row0 + ar) * K + k0 + ak, row0 + ar < M ? clamp4(K - k0 - ak) : 0, vec);
      As[(ak + 0) * (BM + PAD) + ar] = va.x;
      As[(ak + 1) * (BM + PAD) + ar] = va.y;
      As[(ak + 2) * (BM + PAD) + ar] = va.z;
      As[(ak + 3) * (BM + PAD) + ar] = va.w;
      int bk = e / (BN / 4), bc = (e % (BN / 4)) * 4;
      float4 vb = load4(b + (size_t)(k0 + bk) * N + col0 + bc, k0 + bk < K ? clamp4(N - col0 - bc) : 0, vec);
      *reinterpret_cast<float4*>(&Bs[bk * BN + bc]) = vb;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float* as = &As[k * (BM + PAD) + wrow * WM + trw * TM];
      LDS128(ra, 0, &as[0]);
      LDS128(ra, 4, &as[4]);
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
        LDS128(rb, wn * TN, &Bs[k * BN + wcol * WN + wn * WSUBN + tcw * TN]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    int r = row0 + wrow * WM + trw * TM + i;
    if (r >= M) continue;
#pragma unroll
    for (int wn = 0; wn < WNITER; ++wn) {
      int q = col0 + wcol * WN + wn * WSUBN + tcw * TN;
      store4(c + (size_t)r * N + q, ACC4(acc, i, wn * TN), clamp4(N - q), vec);
    }
  }
}
GEMM_EXPORT(sgemm_warptile, gemm_warptile, 128)
