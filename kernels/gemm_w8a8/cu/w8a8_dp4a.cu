// cuda_dp4a: int8 GEMM on the CUDA cores with __dp4a (four int8 products added to an int32 in one instruction,
// IDP4A, sm_61+). A 16x16 block (256 threads) computes a 32x32 tile of c, each thread a 2x2 block of it.
//
// a[M,K] and b[N,K] are int8, both K-major, so four neighbouring k of one row are one 32-bit word: the shared
// tiles hold words, 32 rows x 8 words (32 bytes of K) each, padded to 9 words a row so that 16 threads reading
// 16 different rows of Bs at the same word hit 16 different banks. Per K step each thread stores one word of each
// tile, from one 4-byte load when every row starts on a 4-byte boundary (K % 4 == 0, host flag vec), else packed
// from four guarded byte loads (ragged K: bytes past K load as 0 and add nothing).
//
// The sum stays int32 until the epilogue: c = float(acc) * scale_a[row] * scale_b[col], rounded to bf16 once.
#include "../../include/kernel_helpers.cuh"  // cuda_bf16.h
#include "w8a8_common.cuh"                     // load_word

#define TM 32    // rows (and columns) of c per block
#define KW 8     // words of K per step: 32 int8
#define PAD 9    // words per shared row: KW + 1

extern "C" __global__ void __launch_bounds__(256) w8a8_dp4a(const signed char* __restrict__ a,
                                                            const signed char* __restrict__ b,
                                                            const float* __restrict__ scale_a,
                                                            const float* __restrict__ scale_b,
                                                            __nv_bfloat16* __restrict__ c, int M, int N, int K,
                                                            int vec) {
  __shared__ int As[TM][PAD];
  __shared__ int Bs[TM][PAD];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
  const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TM;
  const int lr = t / KW, lw = t % KW;  // the word this thread stages: tile row lr, word lw
  int acc[2][2] = {{0, 0}, {0, 0}};
  for (int k0 = 0; k0 < K; k0 += 4 * KW) {
    As[lr][lw] = load_word(a, row0 + lr, M, k0 + 4 * lw, K, vec);
    Bs[lr][lw] = load_word(b, col0 + lr, N, k0 + 4 * lw, K, vec);
    __syncthreads();
#pragma unroll
    for (int w = 0; w < KW; ++w) {
      const int a0 = As[ty][w], a1 = As[ty + 16][w], b0 = Bs[tx][w], b1 = Bs[tx + 16][w];
      acc[0][0] = __dp4a(a0, b0, acc[0][0]);  // 4 multiply-adds per instruction
      acc[0][1] = __dp4a(a0, b1, acc[0][1]);
      acc[1][0] = __dp4a(a1, b0, acc[1][0]);
      acc[1][1] = __dp4a(a1, b1, acc[1][1]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
      if (row < M && col < N)  // the epilogue: the scales once per output, on the exact integer sum
        c[(size_t)row * N + col] = __float2bfloat16((float)acc[i][j] * scale_a[row] * scale_b[col]);
    }
}
