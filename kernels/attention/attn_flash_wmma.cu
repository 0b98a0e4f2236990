// FlashAttention forward on tensor cores through nvcuda::wmma (fp16/bf16 in, fp32 accumulate and softmax).
//
// Block: BR = 64 query rows of one (batch, head), 4 warps; warp w owns rows 16w..16w+15 (one 16-row strip).
// Q is staged once through shared memory into per-warp matrix_a fragments (registers, HD/16 of them). Then per
// K/V tile of BC = 32 keys:
//   1. the block stages K[c0:c0+32, :] and V[c0:c0+32, :] in shared memory (input dtype, zero padded);
//   2. each warp computes its S strip = Q_w K^T (16 x 32) with wmma 16x16x16: 2 x HD/16 mma_sync, fp32
//      accumulators, and stores it to shared memory (the accumulator's lane layout is opaque in wmma);
//   3. two lanes per row run the online softmax in fp32 on the strip (scale * log2(e) folded in, exp2f, masks),
//      write P in the input dtype for the next mma, and keep the row's running max m and sum l in registers;
//   4. the O accumulators (HD/16 fragments of 16 x 16 fp32, registers) are rescaled by exp2(m_old - m_new):
//      wmma hides which lane holds which row, so each fragment makes a round trip through the warp's S strip in
//      shared memory (skipped when no row's max moved: a warp vote); v5's mma.sync knows the layout and doesn't;
//   5. O += P V with wmma: 2 x HD/16 mma_sync.
// After the last tile O / l is written in the input dtype (through the same shared scratch).
// Napkin numbers, HD = 128: shared memory = Q staging / K+V tiles 2 * 32 * 136 * 2 B = 17,408 B (aliased) +
// S strip 64 * 36 * 4 B = 9,216 B + P 64 * 40 * 2 B = 5,120 B = 31,744 B per block (static, under 48 KiB).
// Per tile a warp issues 2 * 2 * 8 = 32 mma_sync of 16x16x16 (8,192 FLOP each): 262,144 FLOP per warp, 1 MFLOP
// per block on 16 KiB of K+V (64 FLOP per byte at fp16). Rows are padded by 8 halves (16 B) / 4 floats so the
// 16 rows a fragment load touches spread over the banks. Causal: tiles past the block's last row are skipped, and
// a warp whose 16 rows all precede the tile skips its math (it still meets the block's barriers).
// Any Sq, Sk; D is zero-padded to the compiled HD in {16, 32, 64, 128} (wmma works in 16-wide k steps).
// ptxas (sm_90, HD = 128, fp16): 166 registers, no spills, 64 HMMA per tile loop -> 3 blocks (12 warps) per SM.
#include "../include/kernel_helpers.cuh"  // to_f32, from_f32, instance selection
#include <mma.h>

using namespace nvcuda;

#define BR 64   // query rows per block: 4 warps x 16
#define NT 128  // threads per block
#define BC 32  // keys per K/V tile
#define PAD 8   // halves of padding per row of the Q/K/V/P tiles (16 B: keeps wmma's 16-byte ldm rule)
#define SPAD 4  // floats of padding per row of the S strip

// q, k, v, o: [BH, S, D] row-major (B and H flattened). scale_log2 = scale * log2(e).
template <typename T, int HD>
__device__ void attn_flash_wmma(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                T* __restrict__ o, int Sq, int Sk, int D, float scale_log2, int causal) {
  constexpr int LD = HD + PAD;  // row stride of the Q/K/V tiles, in elements
  constexpr int NF = HD / 16;   // 16-wide fragments along the head dim
  constexpr int KV_BYTES = 2 * BC * LD * sizeof(T);    // K and V tiles; Q (BR x LD) is staged here first
  constexpr int S_BYTES = BR * (BC + SPAD) * 4;         // fp32 S strips, then scratch for O fragments
  constexpr int P_BYTES = BR * (BC + PAD) * sizeof(T);  // P in the input dtype
  static_assert(BR * LD <= 2 * BC * LD, "the Q staging area must fit in the K+V tiles it aliases");
  __shared__ __align__(128) unsigned char smem[KV_BYTES + S_BYTES + P_BYTES];
  T (*Qs)[LD] = reinterpret_cast<T (*)[LD]>(smem);                                 // [BR][LD], before tile 0
  T (*Ks)[LD] = reinterpret_cast<T (*)[LD]>(smem);                                 // [BC][LD]
  T (*Vs)[LD] = reinterpret_cast<T (*)[LD]>(smem + KV_BYTES / 2);                  // [BC][LD]
  float (*Ss)[BC + SPAD] = reinterpret_cast<float (*)[BC + SPAD]>(smem + KV_BYTES);  // [BR][BC + SPAD]
  T (*Ps)[BC + PAD] = reinterpret_cast<T (*)[BC + PAD]>(smem + KV_BYTES + S_BYTES);  // [BR][BC + PAD]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r0 = blockIdx.x * BR, w0 = warp * 16;  // block's first row; warp's first row within the block
  const int lr = lane / 2, half = lane % 2;        // softmax: lanes 2r and 2r+1 share row w0 + r, 16 columns each
  const int i = r0 + w0 + lr;                      // this lane's query row (softmax and output)
  const size_t head = (size_t)blockIdx.y;
  const T* qh = q + head * Sq * D;
  const T* kh = k + head * Sk * D;
  const T* vh = v + head * Sk * D;
  const T zero = from_f32<T>(0.0f);

  // Q: stage the 64 x HD tile (zero padded), then each warp keeps its 16 x HD strip as matrix_a fragments.
  for (int e = tid; e < BR * HD; e += NT) {
    int r = e / HD, c = e % HD;
    Qs[r][c] = (r0 + r < Sq && c < D) ? qh[(size_t)(r0 + r) * D + c] : zero;
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) wmma::load_matrix_sync(qf[f], &Qs[w0][f * 16], LD);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) wmma::fill_fragment(of[f], 0.0f);
  float m = -CUDART_INF_F, l = 0.0f;  // this lane's row: running max (log2 units) and running sum
  __syncthreads();  // every warp has its Q fragments before the first K tile overwrites the staging area

  const int kend = causal ? min(Sk, r0 + BR) : Sk;  // causal: keys past the block's last row are masked for all
  for (int c0 = 0; c0 < kend; c0 += BC) {
    for (int e = tid; e < BC * HD; e += NT) {  // 128 threads stage 2 x 32 x HD elements, coalesced along D
      int jj = e / HD, c = e % HD;
      bool in = c0 + jj < Sk && c < D;
      Ks[jj][c] = in ? kh[(size_t)(c0 + jj) * D + c] : zero;
      Vs[jj][c] = in ? vh[(size_t)(c0 + jj) * D + c] : zero;
    }
    __syncthreads();

    if (!causal || c0 <= r0 + w0 + 15) {  // warp-uniform: some row of this warp sees some key of the tile
      // 2. S = Q K^T for the warp's 16 rows x 32 keys. K row-major [key][d] is K^T column-major: col_major b.
#pragma unroll
      for (int n = 0; n < BC / 16; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
        wmma::fill_fragment(sf, 0.0f);
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
          wmma::load_matrix_sync(kf, &Ks[n * 16][f * 16], LD);
          wmma::mma_sync(sf, qf[f], kf, sf);
        }
        wmma::store_matrix_sync(&Ss[w0][n * 16], sf, BC + SPAD, wmma::mem_row_major);
      }
      __syncwarp();

      // 3. Online softmax: lane (lr, half) handles columns half*16 .. half*16+15 of row w0 + lr.
      float x[BC / 2];
      float mt = -CUDART_INF_F;
#pragma unroll
      for (int t = 0; t < BC / 2; ++t) {
        int j = c0 + half * (BC / 2) + t;
        bool visible = j < Sk && (!causal || j <= i);
        x[t] = visible ? Ss[w0 + lr][half * (BC / 2) + t] * scale_log2 : -CUDART_INF_F;
        mt = fmaxf(mt, x[t]);
      }
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));  // the row's other half
      const float m_new = fmaxf(m, mt);
      const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;  // no visible key yet: avoid (-inf) - (-inf)
      const float alpha = exp2f(m - m_use);  // 0 on the first tile, 1 when the max did not move
      float ps = 0.0f;
#pragma unroll
      for (int t = 0; t < BC / 2; ++t) {
        T p = from_f32<T>(exp2f(x[t] - m_use));
        Ps[w0 + lr][half * (BC / 2) + t] = p;
        ps += to_f32(p);  // sum what the P V mma multiplies (rounded p): O stays a convex combination of V rows
      }
      ps += __shfl_xor_sync(0xffffffffu, ps, 1);
      l = l * alpha + ps;
      m = m_new;
      __syncwarp();  // P written and the S strip read: the strip is free as scratch

      // 4. Rescale O by alpha, row by row, through the S strip (16 x 16 fp32 per fragment).
      if (!__all_sync(0xffffffffu, alpha == 1.0f) && c0 > 0) {  // tile 0: O is still zero
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          wmma::store_matrix_sync(&Ss[w0][0], of[f], BC + SPAD, wmma::mem_row_major);
          __syncwarp();
#pragma unroll
          for (int t = 0; t < 8; ++t) Ss[w0 + lr][half * 8 + t] *= alpha;
          __syncwarp();
          wmma::load_matrix_sync(of[f], &Ss[w0][0], BC + SPAD, wmma::mem_row_major);
        }
      }

      // 5. O += P V: P (16 x 32) row-major, V tile [key][d] row-major.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf[BC / 16];
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) wmma::load_matrix_sync(pf[kk], &Ps[w0][kk * 16], BC + PAD);
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
          wmma::load_matrix_sync(vf, &Vs[kk * 16][f * 16], LD);
          wmma::mma_sync(of[f], pf[kk], vf, of[f]);
        }
    }
    __syncthreads();  // everyone is done with the K/V tiles before the next ones overwrite them
  }

  // Epilogue: O / l in the input dtype, one 16 x 16 fragment at a time through the warp's S strip.
  const float inv = 1.0f / l;  // l >= 1: key 0 is visible to every row (Sk >= 1 is checked on the host)
  T* orow = o + head * Sq * D + (size_t)i * D;
#pragma unroll
  for (int f = 0; f < NF; ++f) {
    wmma::store_matrix_sync(&Ss[w0][0], of[f], BC + SPAD, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      int c = f * 16 + half * 8 + t;
      if (i < Sq && c < D) orow[c] = from_f32<T>(Ss[w0 + lr][half * 8 + t] * inv);
    }
    __syncwarp();
  }
}

// One extern "C" kernel per (padded head dim, dtype): attn_flash_wmma_d<HD>_<f16|bf16>. -DWB_ONLY_HD=<HD> and
// -DWB_ONLY_DT=<2 f16 | 3 bf16> compile just one (the GPU launcher and wb.inspect do).
#define ATTN_WMMA(SUF, T, HD)                                                                                     \
  extern "C" __global__ void __launch_bounds__(NT)                                                                \
      attn_flash_wmma_d##HD##_##SUF(const T* q, const T* k, const T* v, T* o, int Sq, int Sk, int D,              \
                                    float scale_log2, int causal) {                                               \
    attn_flash_wmma<T, HD>(q, k, v, o, Sq, Sk, D, scale_log2, causal);                                            \
  }
WB_EACH_HEAD_DIM(WB_EACH_HALF, ATTN_WMMA)
