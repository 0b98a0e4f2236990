// cuda_mma_sync: mma.sync + ldmatrix + a 3-stage cp.async pipeline (inline PTX; Ampere and later; GPU only).
// Block 256 threads (8 warps as 2x4) -> 128x128 of c; warp tile 64x32 = 4x4 mma.m16n8k16 tiles, 64 fp32
// accumulators per thread. Per 32-deep k tile: 16 KiB of a+b arrive by cp.async (LDGSTS, bypassing registers)
// while the tensor cores work on the tile loaded two steps earlier. Fragments come from shared memory with
// ldmatrix (LDSM: one instruction loads a whole 16x16 A fragment; .trans turns row-major b into the "col"
// operand). Rows are padded by 8 halves (16 B) so the 8 row addresses of each ldmatrix hit different banks.
// Shared memory: 3 x (128x40 + 32x136) halves = 56.8 KiB: dynamic, above the 48 KiB static limit.
#include "gemm_common.cuh"
#include "../../include/mma_ptx.cuh"  // cp.async, ldmatrix, mma.sync m16n8k16

#define BM 128
#define BN 128
#define BK 32
#define STAGES 3
#define AST (BK + 8)   // a row stride in halves: 80 B
#define BST (BN + 8)   // b row stride in halves: 272 B
#define A_STAGE (BM * AST)
#define B_STAGE (BK * BST)
#define NT 256

// Stage k tile kt into shared memory: 16-byte cp.async chunks when `vec` (K, N multiples of 8, aligned),
// else guarded element copies (synchronous; the barrier before use covers them too).
template <typename T>
__device__ __forceinline__ void load_tile(T* As, T* Bs, const T* a, const T* b, int M, int N, int K, int row0,
                                          int col0, int k0, bool vec) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // a: 128 rows x 4 chunks of 8 halves
    int c = tid + i * NT, r = c / 4, q = (c % 4) * 8;
    T* dst = As + r * AST + q;
    int gr = row0 + r, gq = k0 + q;
    if (vec) {
      bool in = gr < M && gq < K;  // K % 8 == 0: a chunk is all in or all out
      cp_async16(dst, in ? a + (size_t)gr * K + gq : a, in ? 16 : 0);
    } else {
      for (int j = 0; j < 8; ++j) dst[j] = (gr < M && gq + j < K) ? a[(size_t)gr * K + gq + j] : from_f32<T>(0.f);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // b: 32 rows x 16 chunks of 8 halves
    int c = tid + i * NT, r = c / 16, q = (c % 16) * 8;
    T* dst = Bs + r * BST + q;
    int gr = k0 + r, gq = col0 + q;
    if (vec) {
      bool in = gr < K && gq < N;
      cp_async16(dst, in ? b + (size_t)gr * N + gq : b, in ? 16 : 0);
    } else {
      for (int j = 0; j < 8; ++j) dst[j] = (gr < K && gq + j < N) ? b[(size_t)gr * N + gq + j] : from_f32<T>(0.f);
    }
  }
}

template <typename T>
__device__ void gemm_mma(const T* a, const T* b, T* c, int M, int N, int K, bool vec) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + STAGES * A_STAGE;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int ktiles = (K + BK - 1) / BK;
  float acc[4][4][4] = {};

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {  // prologue: k tiles 0 and 1 in flight
    if (s < ktiles) load_tile(As + s * A_STAGE, Bs + s * B_STAGE, a, b, M, N, K, row0, col0, s * BK, vec);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // tile kt has landed (at most one younger group still in flight)
    __syncthreads();              // ... for every thread; and everyone is done with the slot we refill next
    int nk = kt + STAGES - 1;
    if (nk < ktiles) {
      int s = nk % STAGES;
      load_tile(As + s * A_STAGE, Bs + s * B_STAGE, a, b, M, N, K, row0, col0, nk * BK, vec);
    }
    cp_async_commit();
    const T* as = As + (kt % STAGES) * A_STAGE;
    const T* bs = Bs + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned fa[4][4], fb[2][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        ldmatrix_x4(fa[mi], as + (wm + mi * 16 + lane % 16) * AST + kk + (lane / 16) * 8);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)  // one x4.trans = two n8 fragments (16 columns)
        ldmatrix_x4_trans(fb[nj], bs + (kk + lane % 16) * BST + wn + nj * 16 + (lane / 16) * 8);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma16816<T>(acc[mi][ni], fa[mi], fb[ni / 2][(ni % 2) * 2], fb[ni / 2][(ni % 2) * 2 + 1]);
    }
  }
  cp_async_wait<0>();
  // Accumulator layout of m16n8: d0,d1 at (row g, cols 2t, 2t+1), d2,d3 at row g + 8; g = lane/4, t = lane%4.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int r = row0 + wm + mi * 16 + g + h * 8, q = col0 + wn + ni * 8 + t * 2;
        if (r < M && q < N) c[(size_t)r * N + q] = from_f32<T>(acc[mi][ni][h * 2]);
        if (r < M && q + 1 < N) c[(size_t)r * N + q + 1] = from_f32<T>(acc[mi][ni][h * 2 + 1]);
      }
}

extern "C" __global__ void __launch_bounds__(NT)
    hgemm_mma_sync_f16(const __half* a, const __half* b, __half* c, int M, int N, int K, int vec) {
  gemm_mma<__half>(a, b, c, M, N, K, vec != 0);
}
extern "C" __global__ void __launch_bounds__(NT) hgemm_mma_sync_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                                                     __nv_bfloat16* c, int M, int N, int K, int vec) {
  gemm_mma<__nv_bfloat16>(a, b, c, M, N, K, vec != 0);
}
