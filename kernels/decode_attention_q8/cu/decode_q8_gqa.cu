// Paged decode attention over an int8 or fp8-e4m3 KV cache: one warp per KV head serves up to 8 query heads of
// its GQA group, the codes dequantized in registers as they are read.
//
// The cache holds one byte per value (a code) and one fp32 scale per (token slot, KV head) row: k = code *
// k_scale[row]. A scale constant along a row comes out of the sums, so it is applied once per token, not per value:
//   score = (softmax scale * sum_d q_d * kcode_d) * k_scale[row]
//   acc  += (w * v_scale[row]) * vcode      (the V scale folded into the token's softmax weight)
// Each lane decodes its codes of a row (columns lane, lane + 32, ...: 32 neighbouring bytes per warp-wide read)
// once, and every query head the warp serves uses them: a group of <= 8 heads reads each K and V row from memory
// once (decode_attention's cuda_warp reads it once per query head). A larger group takes ceil(group / 8) warps.
// Rows no sequence owns hold junk codes and NaN scales: only the slots below seq_len are ever read.
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE

#define MAXD 128          // head dims up to 128: 4 columns per lane
#define VPL (MAXD / 32)   // values per lane
#define MAXG 8            // query heads per warp, each with its q, acc, m and l in registers

// The code formats: one byte in, its value before the row's scale out.
struct Int8Codes {
  static __device__ __forceinline__ float value(unsigned char c) { return (float)(signed char)c; }
};
// float8_e4m3fn: a sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN. Decoded
// with integer ops (no fp8 header needed): a normal code's exponent is rebiased from 7 to fp32's 127 and its
// mantissa moved to fp32's top mantissa bits; exponent 0 is subnormal, m/8 * 2^-6.
struct E4m3Codes {
  static __device__ __forceinline__ float value(unsigned char c) {
    const int e = (c >> 3) & 15, m = c & 7;
    float mag;
    if (e == 15 && m == 7) mag = CUDART_NAN_F;
    else if (e == 0) mag = (float)m * 0.001953125f;  // m * 2^-9
    else mag = __int_as_float(((e + 120) << 23) | (m << 20));
    return (c & 0x80) ? -mag : mag;
  }
};

// q, out: [B, Hq, D]; kq, vq: [P, page, Hkv, D] codes; ks, vs: [P, page, Hkv] fp32; table: [B, maxp]; lens: [B].
// Grid (ceil(Hkv * chunks / warps per block), B), chunks = ceil(group / MAXG).
template <typename T, typename Codes>
__device__ void decode_q8_gqa(const T* __restrict__ q, const unsigned char* __restrict__ kq,
                              const float* __restrict__ ks, const unsigned char* __restrict__ vq,
                              const float* __restrict__ vs, const int* __restrict__ table,
                              const int* __restrict__ lens, T* __restrict__ out, int Hq, int Hkv, int D, int page,
                              int maxp, float scale) {
  const int group = Hq / Hkv, chunks = (group + MAXG - 1) / MAXG;
  const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;  // this warp's (KV head, chunk of its group)
  if (w >= Hkv * chunks) return;  // a whole warp leaves together: its shuffles stay full-warp
  const int lane = threadIdx.x & 31, b = blockIdx.y, n = lens[b];
  const int kvh = w / chunks, h0 = kvh * group + (w % chunks) * MAXG;
  const int nh = min(MAXG, (kvh + 1) * group - h0);  // it serves query heads h0 .. h0 + nh - 1
  float qs[MAXG][VPL], acc[MAXG][VPL], m[MAXG], l[MAXG];
#pragma unroll
  for (int g = 0; g < MAXG; ++g) {
    m[g] = -CUDART_INF_F;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
      const int d = lane + 32 * i;
      qs[g][i] = g < nh && d < D ? to_f32(q[((size_t)b * Hq + h0 + g) * D + d]) * scale : 0.0f;
      acc[g][i] = 0.0f;
    }
  }
  for (int t = 0; t < n; ++t) {
    // token t: its page id from the block table (the same 4 bytes for a page's tokens: a cache hit), then its row
    const size_t pid = (size_t)table[(size_t)b * maxp + t / page];
    const size_t row = (pid * page + t % page) * Hkv + kvh;  // the (slot, KV head) row: its scales' index
    float kc[VPL], vc[VPL];  // this lane's codes of the row, decoded once for every head the warp serves
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
      const int d = lane + 32 * i;
      kc[i] = d < D ? Codes::value(kq[row * D + d]) : 0.0f;
      vc[i] = d < D ? Codes::value(vq[row * D + d]) : 0.0f;
    }
    const float k_s = ks[row], v_s = vs[row];
#pragma unroll
    for (int g = 0; g < MAXG; ++g) {
      if (g < nh) {  // the same for every lane: the warp_sum stays full-warp
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < VPL; ++i) dot += qs[g][i] * kc[i];
        const float sc = warp_sum(dot) * k_s;  // every lane: head g's score of token t
        const float m_new = fmaxf(m[g], sc);
        const float alpha = expf(m[g] - m_new);  // first token: e^-inf = 0
        const float wt = expf(sc - m_new);
        l[g] = l[g] * alpha + wt;
        const float wv = wt * v_s;  // the weight of the token's V codes
#pragma unroll
        for (int i = 0; i < VPL; ++i) acc[g][i] = acc[g][i] * alpha + wv * vc[i];
        m[g] = m_new;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < MAXG; ++g) {
    if (g < nh) {
      const float inv = 1.0f / l[g];  // seq_len >= 1: l >= 1
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int d = lane + 32 * i;
        if (d < D) out[((size_t)b * Hq + h0 + g) * D + d] = from_f32<T>(acc[g][i] * inv);
      }
    }
  }
}

// decode_q8_<codes>_<dtype>: codes i8 (int8) or e4m3, dtype q's and out's (f32, f16, bf16).
#define DECODE_Q8(SFX, T, CODE, CODES)                                                                            \
  extern "C" __global__ void decode_q8_##CODE##_##SFX(const T* q, const unsigned char* kq, const float* ks,       \
                                                      const unsigned char* vq, const float* vs, const int* table, \
                                                      const int* lens, T* out, int Hq, int Hkv, int D, int page,  \
                                                      int maxp, float scale) {                                   \
    decode_q8_gqa<T, CODES>(q, kq, ks, vq, vs, table, lens, out, Hq, Hkv, D, page, maxp, scale);                  \
  }
#define DECODE_Q8_CODES(SFX, T, ...) DECODE_Q8(SFX, T, i8, Int8Codes) DECODE_Q8(SFX, T, e4m3, E4m3Codes)
WB_EACH_DTYPE(DECODE_Q8_CODES)
