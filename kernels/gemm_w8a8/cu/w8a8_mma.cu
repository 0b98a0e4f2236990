// cuda_mma (GPU only): int8 GEMM on the tensor cores with mma.sync m16n8k32 (s8 x s8 -> s32, sm_80+). A block of
// 4 warps computes a 64x64 tile of c; each warp a 32x32 quarter of it, as 2 x 4 fragments of 16x8.
//
// a[M,K] and b[N,K] are both K-major, which is exactly what the instruction's row.col layout wants: a lane's A
// register is four K-neighbouring bytes of one row of a, its B register four K-neighbouring bytes of one row of b
// (a column of the 32x8 B fragment). So the shared tiles hold 32-bit words, 64 rows x 8 words (32 bytes of K), and
// fragments are plain word loads, no ldmatrix and no byte shuffling. Rows are padded to 12 words: the 8 rows g and 4
// words t a warp reads at once land in 32 different banks (12g + t mod 32).
//
// The int32 accumulators stay in registers for the whole K loop; the epilogue converts each to fp32, multiplies
// by scale_a[row] * scale_b[col] and rounds to bf16 once.
#include "../../include/kernel_helpers.cuh"  // cuda_bf16.h
#include "w8a8_common.cuh"                     // load_word
#include "w8a8_mma_ptx.cuh"                    // mma_s8_16832

#define BM 64    // rows of c per block (and columns: BN = BM)
#define KW 8     // words of K per step: 32 int8, one mma's K
#define PADW 12  // words per shared row

extern "C" __global__ void __launch_bounds__(128) w8a8_mma(const signed char* __restrict__ a,
                                                           const signed char* __restrict__ b,
                                                           const float* __restrict__ scale_a,
                                                           const float* __restrict__ scale_b,
                                                           __nv_bfloat16* __restrict__ c, int M, int N, int K,
                                                           int vec) {
  __shared__ int As[BM][PADW];
  __shared__ int Bs[BM][PADW];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BM;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // the warp's 32x32 quarter of the block tile
  int acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;
  for (int k0 = 0; k0 < K; k0 += 4 * KW) {
    for (int i = tid; i < BM * KW; i += 128) {  // 512 words of each tile: 4 per thread
      const int r = i / KW, w = i % KW;
      As[r][w] = load_word(a, row0 + r, M, k0 + 4 * w, K, vec);
      Bs[r][w] = load_word(b, col0 + r, N, k0 + 4 * w, K, vec);
    }
    __syncthreads();
    unsigned af[2][4], bf[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int r = wm + 16 * mi + g;
      af[mi][0] = As[r][t];
      af[mi][1] = As[r + 8][t];
      af[mi][2] = As[r][4 + t];
      af[mi][3] = As[r + 8][4 + t];
    }
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int n = wn + 8 * ni + g;
      bf[ni][0] = Bs[n][t];
      bf[ni][1] = Bs[n][4 + t];
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_s8_16832(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + wm + 16 * mi + g + 8 * (e / 2), col = col0 + wn + 8 * ni + 2 * t + e % 2;
        if (row < M && col < N)  // the epilogue: the scales once per output, on the exact integer sum
          c[(size_t)row * N + col] = __float2bfloat16((float)acc[mi][ni][e] * scale_a[row] * scale_b[col]);
      }
}
