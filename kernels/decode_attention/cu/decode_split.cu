// Split-KV paged decode attention (flash-decoding) and the log-sum-exp merge, two kernels.
//
// A decode step has one query token per sequence: B * Hq warps are too few to fill a GPU when B is small and the
// sequences long. decode_split gives each sequence's pages to S splits (ceil(n_pages / S) pages each, the last
// ones ragged or empty), one warp per (split, sequence, query head), each the online softmax of decode_warp.cu over
// its own pages only. It writes a partial output o_s (normalised over the split) in fp32 and the split's
// log-sum-exp lse_s = m + log(l); an empty split writes lse = -inf and o = 0.
// lse_merge then weights the partials by their share of the softmax mass: w_s = e^(lse_s - max_s lse_s),
// out = sum_s w_s o_s / sum_s w_s, skipping empty splits (their o is not to be trusted: 0 * NaN is NaN).
// The same merge kernel serves the lse_merge op (its instances lse_merge_<dtype>: partials in the op's dtype).
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE
#include "../../include/decode_row.cuh"      // DecodeRow, decode_start/pages/store

// o_part: [S, B, Hq, D] fp32; lse_part: [S, B, Hq] fp32. Grid (ceil(Hq / warps), B, S).
template <typename T>
__device__ void decode_split(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             const int* __restrict__ table, const int* __restrict__ lens, float* __restrict__ o_part,
                             float* __restrict__ lse_part, int B, int Hq, int Hkv, int D, int page, int maxp,
                             float scale) {
  const int h = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int b = blockIdx.y, s = blockIdx.z, S = gridDim.z;
  if (h >= Hq) return;
  const int n = lens[b];
  const int n_pages = (n + page - 1) / page;
  const int per = (n_pages + S - 1) / S;  // pages per split
  const int lo = min(s * per, n_pages), hi = min(lo + per, n_pages);
  DecodeRow r;
  decode_start(r, q + ((size_t)b * Hq + h) * D, D, scale);
  decode_pages(r, k, v, table + (size_t)b * maxp, lo, hi, n, page, Hkv, h / (Hq / Hkv), D);
  const size_t slot = ((size_t)s * B + b) * Hq + h;
  decode_store(r, r.l > 0.0f ? 1.0f / r.l : 0.0f, o_part + slot * D, D);  // an empty split: o = 0, lse = -inf
  if ((threadIdx.x & 31) == 0) lse_part[slot] = r.l > 0.0f ? r.m + logf(r.l) : -CUDART_INF_F;
}

// o: [S, B*H, D] partials (TI), lse: [S, B*H] fp32, out: [B*H, D] (TO). One warp per (b, h): grid ceil(BH / warps).
template <typename TI, typename TO>
__device__ void merge_splits(const TI* __restrict__ o, const float* __restrict__ lse, TO* __restrict__ out, int S,
                             int BH, int D) {
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= BH) return;
  float m = -CUDART_INF_F;
  for (int s = 0; s < S; ++s) m = fmaxf(m, lse[(size_t)s * BH + r]);
  float total = 0.0f;
  for (int s = 0; s < S; ++s) {
    const float ls = lse[(size_t)s * BH + r];
    if (ls != -CUDART_INF_F) total += expf(ls - m);  // an empty split adds nothing
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;  // every split empty: 0
  for (int d = lane; d < D; d += 32) {
    float a = 0.0f;
    for (int s = 0; s < S; ++s) {
      const float ls = lse[(size_t)s * BH + r];
      if (ls != -CUDART_INF_F) a += expf(ls - m) * to_f32(o[((size_t)s * BH + r) * D + d]);
    }
    out[(size_t)r * D + d] = from_f32<TO>(a * inv);
  }
}

#define DECODE_SPLIT(SFX, T, ...)                                                                                  \
  extern "C" __global__ void decode_split_##SFX(const T* q, const T* k, const T* v, const int* table,             \
                                                const int* lens, float* o_part, float* lse_part, int B, int Hq,  \
                                                int Hkv, int D, int page, int maxp, float scale) {               \
    decode_split<T>(q, k, v, table, lens, o_part, lse_part, B, Hq, Hkv, D, page, maxp, scale);                    \
  }                                                                                                               \
  extern "C" __global__ void decode_merge_##SFX(const float* o, const float* lse, T* out, int S, int BH, int D) { \
    merge_splits<float, T>(o, lse, out, S, BH, D);                                                                \
  }                                                                                                               \
  extern "C" __global__ void lse_merge_##SFX(const T* o, const float* lse, T* out, int S, int BH, int D) {        \
    merge_splits<T, T>(o, lse, out, S, BH, D);                                                                    \
  }
WB_EACH_DTYPE(DECODE_SPLIT)
