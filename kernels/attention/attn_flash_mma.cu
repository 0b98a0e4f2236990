// FlashAttention-2 forward with mma.sync.m16n8k16 (inline PTX: ldmatrix, mma.sync, cp.async; sm_80+; GPU only).
//
// Block: BR = 64 query rows of one (batch, head), 4 warps; warp w owns rows 16w..16w+15. Unlike v4 (wmma), the
// accumulator layout of mma.sync is documented: lane l holds rows g = l/4 and g + 8, columns 2t and 2t + 1
// (t = l%4) of every m16n8 tile. So everything after the loads stays in registers:
//   * Q: ldmatrix'd once into A fragments (HD/16 x 4 regs);
//   * S = Q K^T for 16 rows x BC = 64 keys: 8 n8 tiles x 4 fp32 per lane, K fragments by ldmatrix (K row-major
//     [key][d] is already the "col" B operand);
//   * online softmax in fp32 on the accumulators: each row's max is reduced over the 4 lanes of a quad with two
//     __shfl_xor_sync; O (HD/8 x 4 fp32 per lane) and the per-lane partial row sums are rescaled in registers;
//   * P: the S accumulators of two neighbouring n8 tiles ARE the A fragment of a k16 step (FlashAttention-2's
//     trick), packed to fp16/bf16 pairs without touching shared memory;
//   * O += P V with V fragments by ldmatrix.trans.
// K and V tiles arrive by cp.async (16-byte LDGSTS, zero-filled past Sk) in separate groups: the next K tile
// loads while P V runs, the V tile while S and the softmax run.
// Napkin numbers, HD = 128: shared memory 2 x 64 x 136 x 2 B = 34,816 B (K tile + V tile; Q is staged in the V
// slot before the loop). Per tile a warp issues 8 x 8 + 4 x 16 = 128 mma.m16n8k16 (4,096 FLOP each): 524,288
// FLOP per warp, 2.1 MFLOP per block on 32 KiB of K+V (64 FLOP per byte). Registers: q 32 + s 32 + o 64 per lane.
// ptxas (sm_90, HD = 128, fp16): 165 registers, no spills, 128 HMMA per tile loop -> 3 blocks (12 warps) per SM.
// Causal: tiles past the block's last row are skipped (BR = BC: the last tile is the diagonal one).
// Any Sq, Sk; D is zero-padded to the compiled HD in {16, 32, 64, 128}; D % 8 != 0 (or unaligned rows) takes
// a guarded element-copy path instead of cp.async.
#include "../include/kernel_helpers.cuh"  // to_f32, from_f32, instance selection
#include "../include/mma_ptx.cuh"  // cp.async, ldmatrix, mma.sync m16n8k16

#define BR 64   // query rows per block: 4 warps x 16
#define BC 64   // keys per K/V tile
#define NT 128  // threads per block

// Two fp32 values as one register of two 16-bit values (the first in the low half), and back.
__device__ __forceinline__ unsigned pack2(float a, float b, __half) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ unsigned pack2(float a, float b, __nv_bfloat16) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ float sum2(unsigned u, __half) {
  float2 f = __half22float2(*reinterpret_cast<__half2*>(&u));
  return f.x + f.y;
}
__device__ __forceinline__ float sum2(unsigned u, __nv_bfloat16) {
  float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&u));
  return f.x + f.y;
}

// Stage rows row0 .. row0+63 of src[S][D] into dst[64][HD + 8], zero padded: 16-byte cp.async chunks when `vec`
// (D % 8 == 0, 16-byte aligned rows), else guarded element copies (synchronous; the next barrier covers them).
template <typename T, int HD>
__device__ __forceinline__ void load_rows(T* dst, const T* src, int row0, int S, int D, bool vec) {
  constexpr int LD = HD + 8, CH = HD / 8;  // row stride in elements; 8-element chunks per row
  for (int c = threadIdx.x; c < 64 * CH; c += NT) {
    int r = c / CH, q = (c % CH) * 8, gr = row0 + r;
    T* d = dst + r * LD + q;
    if (vec) {
      bool in = gr < S && q < D;  // D % 8 == 0: a chunk is all in or all out
      cp_async16(d, in ? src + (size_t)gr * D + q : src, in ? 16 : 0);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) d[j] = (gr < S && q + j < D) ? src[(size_t)gr * D + q + j] : from_f32<T>(0.0f);
    }
  }
}

// q, k, v, o: [BH, S, D] row-major (B and H flattened). scale_log2 = scale * log2(e).
template <typename T, int HD>
__device__ void attn_flash_mma(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                               T* __restrict__ o, int Sq, int Sk, int D, float scale_log2, int causal, bool vec) {
  constexpr int LD = HD + 8;  // 8 halves (16 B) of padding: ldmatrix's 8 row addresses hit different banks
  constexpr int NK = HD / 16, ND = HD / 8, NS = BC / 8;
  __shared__ __align__(128) T Ks[BC * LD];
  __shared__ __align__(128) T Vs[BC * LD];  // also the Q staging area before the first tile

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = blockIdx.x * BR, w0 = warp * 16;
  const size_t head = (size_t)blockIdx.y;
  const T* qh = q + head * Sq * D;
  const T* kh = k + head * Sk * D;
  const T* vh = v + head * Sk * D;
  const int kend = causal ? min(Sk, r0 + BR) : Sk;  // causal: keys past the block's last row are masked for all
  const int ntiles = (kend + BC - 1) / BC;

  // Prologue: Q (in V's slot) and K tile 0 in flight; Q fragments to registers; then V tile 0.
  load_rows<T, HD>(Vs, qh, r0, Sq, D, vec);
  cp_async_commit();
  load_rows<T, HD>(Ks, kh, 0, Sk, D, vec);
  cp_async_commit();
  cp_async_wait<1>();  // Q has landed (K tile 0 may still be in flight)
  __syncthreads();
  unsigned qf[NK][4];
#pragma unroll
  for (int f = 0; f < NK; ++f) ldmatrix_x4(qf[f], Vs + (w0 + lane % 16) * LD + f * 16 + (lane / 16) * 8);
  __syncthreads();  // every warp holds its Q fragments: V's slot is free
  load_rows<T, HD>(Vs, vh, 0, Sk, D, vec);
  cp_async_commit();

  float of[ND][4] = {};                                   // O: rows g, g+8 x columns 8d + 2t, 8d + 2t + 1
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};  // rows g and g + 8; l is this lane's part
  for (int tile = 0; tile < ntiles; ++tile) {
    const int c0 = tile * BC;
    cp_async_wait<1>();  // K tile `tile` has landed (V tile `tile` may still be in flight) ...
    __syncthreads();     // ... for every thread's chunks

    float s[NS][4] = {};  // S = Q K^T: 16 rows x 64 keys, n8 tile n holds keys c0 + 8n + 2t, +1
#pragma unroll
    for (int f = 0; f < NK; ++f)
#pragma unroll
      for (int p = 0; p < NS / 2; ++p) {  // one ldmatrix.x4 = B fragments of two n8 tiles (keys 16p .. 16p+15)
        unsigned kf[4];
        ldmatrix_x4(kf, Ks + (p * 16 + (lane / 16) * 8 + lane % 8) * LD + f * 16 + ((lane / 8) % 2) * 8);
        mma16816<T>(s[2 * p], qf[f], kf[0], kf[1]);
        mma16816<T>(s[2 * p + 1], qf[f], kf[2], kf[3]);
      }
    __syncthreads();  // every warp is done with Ks: prefetch the next K tile during the softmax and P V
    if (tile + 1 < ntiles) load_rows<T, HD>(Ks, kh, c0 + BC, Sk, D, vec);
    cp_async_commit();  // (an empty group on the last tile keeps the wait counts uniform)

    // Online softmax on the accumulators, rows h = 0 (g) and h = 1 (g + 8).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = r0 + w0 + g + 8 * h;
      float mt = -CUDART_INF_F;
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int j = c0 + n * 8 + 2 * t + e;
          float x = (j < Sk && (!causal || j <= i)) ? s[n][2 * h + e] * scale_log2 : -CUDART_INF_F;
          s[n][2 * h + e] = x;
          mt = fmaxf(mt, x);
        }
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));  // the 4 lanes of a quad share the row
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
      const float m_new = fmaxf(m[h], mt);
      const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;  // no visible key yet: avoid (-inf) - (-inf)
      const float alpha = exp2f(m[h] - m_use);  // 0 on the first tile
      m[h] = m_new;
      l[h] *= alpha;
#pragma unroll
      for (int d = 0; d < ND; ++d) {
        of[d][2 * h] *= alpha;
        of[d][2 * h + 1] *= alpha;
      }
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) s[n][2 * h + e] = exp2f(s[n][2 * h + e] - m_use);  // masked: 0
    }
    // P as A fragments: k16 step kc = n8 tiles 2kc (keys 2t, 2t+1) and 2kc + 1 (keys 8 + 2t, 9 + 2t).
    unsigned pf[BC / 16][4];
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) {
      pf[kc][0] = pack2(s[2 * kc][0], s[2 * kc][1], T());          // row g
      pf[kc][1] = pack2(s[2 * kc][2], s[2 * kc][3], T());          // row g + 8
      pf[kc][2] = pack2(s[2 * kc + 1][0], s[2 * kc + 1][1], T());  // row g
      pf[kc][3] = pack2(s[2 * kc + 1][2], s[2 * kc + 1][3], T());  // row g + 8
      l[0] += sum2(pf[kc][0], T()) + sum2(pf[kc][2], T());  // the rounded p the mma multiplies
      l[1] += sum2(pf[kc][1], T()) + sum2(pf[kc][3], T());
    }

    cp_async_wait<1>();  // V tile `tile` has landed (the next K tile may still be in flight)
    __syncthreads();
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc)
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {  // one ldmatrix.x4.trans = B fragments of two n8 tiles of d
        unsigned vf[4];
        ldmatrix_x4_trans(vf, Vs + (kc * 16 + lane % 16) * LD + dp * 16 + (lane / 16) * 8);
        mma16816<T>(of[2 * dp], pf[kc], vf[0], vf[1]);
        mma16816<T>(of[2 * dp + 1], pf[kc], vf[2], vf[3]);
      }
    __syncthreads();  // every warp is done with Vs: prefetch the next V tile during the next S
    if (tile + 1 < ntiles) load_rows<T, HD>(Vs, vh, c0 + BC, Sk, D, vec);
    cp_async_commit();
  }
  cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float lr = l[h];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);  // the row sum over the quad's columns
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const int i = r0 + w0 + g + 8 * h;
    if (i < Sq) {
      const float inv = 1.0f / lr;  // lr >= 1: key 0 is visible to every row (Sk >= 1 is checked on the host)
      T* orow = o + head * Sq * D + (size_t)i * D;
#pragma unroll
      for (int d = 0; d < ND; ++d) {
        int col = d * 8 + 2 * t;
        if (col < D) orow[col] = from_f32<T>(of[d][2 * h] * inv);
        if (col + 1 < D) orow[col + 1] = from_f32<T>(of[d][2 * h + 1] * inv);
      }
    }
  }
}

// One extern "C" kernel per (padded head dim, dtype): attn_flash_mma_d<HD>_<f16|bf16>. -DWB_ONLY_HD=<HD> and
// -DWB_ONLY_DT=<2 f16 | 3 bf16> compile just one (the GPU launcher and wb.inspect do).
#define ATTN_MMA(SUF, T, HD)                                                                                      \
  extern "C" __global__ void __launch_bounds__(NT)                                                                \
      attn_flash_mma_d##HD##_##SUF(const T* q, const T* k, const T* v, T* o, int Sq, int Sk, int D,               \
                                   float scale_log2, int causal, int vec) {                                       \
    attn_flash_mma<T, HD>(q, k, v, o, Sq, Sk, D, scale_log2, causal, vec != 0);                                   \
  }
WB_EACH_HEAD_DIM(WB_EACH_HALF, ATTN_MMA)
