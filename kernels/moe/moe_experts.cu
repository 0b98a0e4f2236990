// The expert half of an unfused MoE layer in SIMT CUDA C: permute, grouped GEMM, SiLU-and-mul, grouped GEMM,
// combine. Routing (moe_topk) and the sort by expert (moe_align) happen before, in their own kernels.
//
// Inputs from moe_align, for BLOCK_M = 64: sorted_ids[P] lists the routed slots s = t*top_k + j grouped by expert,
// each group padded with the sentinel T*top_k up to a multiple of 64 rows; expert_ids[P/64] names the expert of
// every 64-row block (-1 past the last group); n_padded[1] is the number of rows in use. P is the worst case, so
// nothing here waits for the host: the launch grids cover all P rows and blocks past n_padded exit at once.
//
//   moe_permute_*    xp[r, :] = x[sorted_ids[r] / top_k, :] (a zero row for a sentinel); pos[s] = r, the inverse map
//   moe_gemm_nt_*    c[r, :] = a[r, :] @ w[e]^T for every 64-row block r of expert e: gate/up (a = xp, w = w1, N = 2I,
//                    K = d) and down (a = act, w = w2, N = d, K = I) are the same "NT" GEMM (both operands K-major)
//   moe_silu_mul_*   act[r, i] = silu(h[r, i]) * h[r, I + i]
//   moe_combine_*    out[t, :] = sum_j weight[t, j] * y[pos[t*top_k + j], :], j = 0..top_k-1 in order: deterministic
//
// Every intermediate (xp [P,d], h [P,2I], act [P,I], y [P,d]) is written to HBM by one kernel and read back by the
// next; that traffic, and the padding rows computed as zeros, is what a fused MoE kernel removes.
// Element type T in {float, __half, __nv_bfloat16}; all arithmetic is fp32, rounded to T once per stored value
// (intermediates are stored in T, as real pipelines do). d and I need not be multiples of any tile: loads past K
// read 0 and stores past N are skipped.
#include "../include/kernel_helpers.cuh"  // to_f32, from_f32, instance selection

#define BLOCK_M 64      // rows per GEMM tile = moe_align's block: one expert per tile
#define BN 64           // output columns per GEMM tile
#define BK 16           // K slice staged in shared memory per step
#define TM 4            // rows of the 4x4 register tile of one thread
#define TN 4            // columns of it
#define GEMM_THREADS 256  // (BLOCK_M / TM) x (BN / TN) = 16 x 16 threads
// Ask ptxas for 4 resident GEMM blocks per SM: at most 65536 / (4 * 256) = 64 registers per thread, 32 warps (50%
// occupancy). Left alone it takes 89 (sm_90; the fully unrolled k loop hoists loads), which fits only 2 blocks.
// Neither spills.
#define GEMM_MIN_BLOCKS 4
#define ROW_THREADS 128   // permute / SiLU / combine: one block per row, 128 threads striding over its columns
#define SMEM_PAD 4      // floats added to each shared row: keeps float4 alignment, spreads the transposed stores

// Gather: padded row r gets token sorted_ids[r] / top_k's row of x, or zeros for a padding slot; the block of a real
// slot also records pos[slot] = r for the combine. Every slot appears exactly once in sorted_ids (moe_align's
// contract), so pos is fully written without atomics. Traffic: d elements read and d written per row in use.
template <typename T>
__device__ void moe_permute(const T* __restrict__ x, const int* __restrict__ sorted_ids,
                            const int* __restrict__ n_padded, T* __restrict__ xp, int* __restrict__ pos, int n_slots,
                            int top_k, int d) {
  const int r = blockIdx.x;
  if (r >= *n_padded) return;  // past the last expert group: no GEMM tile reads these rows
  const int s = sorted_ids[r];
  const bool real = s < n_slots;  // the sentinel is n_slots = T*top_k
  if (real && threadIdx.x == 0) pos[s] = r;
  const T* src = x + (size_t)(real ? s / top_k : 0) * d;
  T* dst = xp + (size_t)r * d;
  for (int c = threadIdx.x; c < d; c += ROW_THREADS) dst[c] = real ? src[c] : from_f32<T>(0.0f);  // coalesced
}

// Grouped GEMM, one 64 x 64 tile of c per block: rows blockIdx.x*64 .. +63 all belong to expert e = expert_ids[bx],
// so the block computes c[rows, cols] = a[rows, :] @ w[e][cols, :]^T with w: [E, N, K] row-major. Per BK = 16 step,
// 256 threads stage a 64 x 16 slice of a and of w[e] (4 elements each; 16 threads read 16 consecutive k of a row)
// transposed into shared memory as fp32, then each thread does 16 x (4 x 4) FMAs from two LDS.128 per k:
// 8 FMAs per shared load. Per tile and step: 2 * 64 * 64 * 16 = 131,072 FLOP for 2 * 1024 elements from global
// memory (L2 mostly): 32 FLOP per fp32 element. A tile whose rows are mostly padding (an expert with few tokens)
// costs as much as a full one: at T = 1, top_k = 2 each of the two blocks does 64 rows of work for 1 real row.
// Grid: x over row blocks (up to 2^31 - 1 of them: any P), y over column tiles. Blocks are issued x first in
// practice, so the row blocks of one expert run side by side on the same w[e] column tile, which L2 (50 MB on an
// H200) keeps between them: at K = 14336 a 64-column fp16 tile of w2 is 1.8 MB.
template <typename T>
__device__ void moe_gemm_nt(const T* __restrict__ a, const T* __restrict__ w, const int* __restrict__ expert_ids,
                            T* __restrict__ c, int N, int K) {
  const int e = expert_ids[blockIdx.x];
  if (e < 0) return;  // past the last expert group; uniform over the block, so no barrier is skipped by half of it
  // Transposed tiles [k][row]: the inner loop reads 4 consecutive rows (or columns) of one k as one float4.
  // Row stride 68 floats: the 16 consecutive k a half-warp stores land in 8 banks, 2-way conflicts (stride 64 would
  // put all 16 in one bank: 16-way).
  __shared__ __align__(16) float As[BK][BLOCK_M + SMEM_PAD];
  __shared__ __align__(16) float Ws[BK][BN + SMEM_PAD];

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);  // this thread's 4x4 tile: rows ty*4.., columns tx*4..
  const size_t row0 = (size_t)blockIdx.x * BLOCK_M;      // P is a multiple of 64: every row of the tile exists
  const int col0 = blockIdx.y * BN;
  const T* at = a + row0 * K;
  const T* wt = w + (size_t)e * N * K;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int p = 0; p < BLOCK_M * BK / GEMM_THREADS; ++p) {  // 4 elements of each tile; BLOCK_M == BN: one loop
      const int q = tid + p * GEMM_THREADS, r = q / BK, kk = q % BK;
      const bool kin = k0 + kk < K;  // ragged K (d or I not a multiple of 16): zeros add nothing
      As[kk][r] = kin ? to_f32(at[(size_t)r * K + k0 + kk]) : 0.0f;
      Ws[kk][r] = (kin && col0 + r < N) ? to_f32(wt[(size_t)(col0 + r) * K + k0 + kk]) : 0.0f;
    }
    __syncthreads();  // both tiles complete before anyone reads them
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 av = *reinterpret_cast<const float4*>(&As[kk][ty * TM]);  // broadcast: 2 distinct ty per warp
      const float4 wv = *reinterpret_cast<const float4*>(&Ws[kk][tx * TN]);  // 16 tx x 16 B: conflict-free
      const float ar[TM] = {av.x, av.y, av.z, av.w};
      const float wr[TN] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ar[i] * wr[j];
    }
    __syncthreads();  // everyone is done with the tiles before the next step overwrites them
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    T* crow = c + (row0 + ty * TM + i) * N;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = col0 + tx * TN + j;
      if (n < N) crow[n] = from_f32<T>(acc[i][j]);  // a warp writes 64 consecutive columns of 2 rows
    }
  }
}

// act[r, i] = silu(gate) * up with gate = h[r, i], up = h[r, I + i]: 3 elements of traffic per output element.
template <typename T>
__device__ void moe_silu_mul(const T* __restrict__ h, const int* __restrict__ n_padded, T* __restrict__ act, int I) {
  const int r = blockIdx.x;
  if (r >= *n_padded) return;
  const T* hr = h + (size_t)r * 2 * I;
  T* ar = act + (size_t)r * I;
  for (int i = threadIdx.x; i < I; i += ROW_THREADS) {
    const float g = to_f32(hr[i]), u = to_f32(hr[I + i]);
    ar[i] = from_f32<T>(g / (1.0f + expf(-g)) * u);  // g -> -inf: g / inf = -0, not NaN
  }
}

// out[t, :] = sum over the token's top_k slots of weight * y[row of that slot, :]. One block per token, each thread
// owns columns, the k terms are added in slot order: the same bits every run (no atomics).
template <typename T>
__device__ void moe_combine(const T* __restrict__ y, const float* __restrict__ weights, const int* __restrict__ pos,
                            T* __restrict__ out, int top_k, int d) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x; c < d; c += ROW_THREADS) {
    float acc = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int s = t * top_k + j;
      acc += weights[s] * to_f32(y[(size_t)pos[s] * d + c]);
    }
    out[(size_t)t * d + c] = from_f32<T>(acc);
  }
}

// extern "C" kernels per dtype: moe_{permute,gemm_nt,silu_mul,combine}_{f32,f16,bf16}. -DWB_ONLY_DT=<1 f32 |
// 2 f16 | 3 bf16> compiles one dtype's four (wb.inspect does; the launchers build the whole file once).
#define MOE_KERNELS(SUF, T, ROWS)                                                                                 \
  extern "C" __global__ void __launch_bounds__(ROWS)                                                              \
      moe_permute_##SUF(const T* x, const int* sorted_ids, const int* n_padded, T* xp, int* pos, int n_slots,     \
                        int top_k, int d) {                                                                       \
    moe_permute<T>(x, sorted_ids, n_padded, xp, pos, n_slots, top_k, d);                                          \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(GEMM_THREADS, GEMM_MIN_BLOCKS)                                     \
      moe_gemm_nt_##SUF(const T* a, const T* w, const int* expert_ids, T* c, int N, int K) {                      \
    moe_gemm_nt<T>(a, w, expert_ids, c, N, K);                                                                    \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(ROWS)                                                              \
      moe_silu_mul_##SUF(const T* h, const int* n_padded, T* act, int I) {                                        \
    moe_silu_mul<T>(h, n_padded, act, I);                                                                         \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(ROWS)                                                              \
      moe_combine_##SUF(const T* y, const float* weights, const int* pos, T* out, int top_k, int d) {             \
    moe_combine<T>(y, weights, pos, out, top_k, d);                                                               \
  }
WB_EACH_DTYPE(MOE_KERNELS, ROW_THREADS)
