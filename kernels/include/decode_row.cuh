// Paged decode attention, one warp per query head: the pieces decode_attention's CUDA C kernels share
// (decode_attention/cu/decode_warp.cu, decode_split.cu, decode_gqa.cu). Include it by its relative path, after
// kernel_helpers.cuh (to_f32, from_f32, warp_sum, WB_EACH_DTYPE), as that header says.
//
// A DecodeRow is one warp's state for one query head: lane l keeps columns l, l + 32, ... (DECODE_VPL of them, head
// dims up to DECODE_MAXD) of the scaled query and of the output accumulator, and every lane the same running max m
// and weight sum l of the online softmax. Per token: the score s = q . k (decode_score: each lane's partial dot,
// one butterfly warp_sum, so every lane holds s), then decode_fold: m' = max(m, s), l = l e^(m - m') + e^(s - m'),
// acc = acc e^(m - m') + e^(s - m') v. A K or V row is a pointer to the token's D values, in the cache's dtype
// (global memory) or fp32 (rows staged in shared memory): to_f32 reads either.
#pragma once

#define DECODE_MAXD 128                 // head dims up to 128: 4 columns per lane
#define DECODE_VPL (DECODE_MAXD / 32)  // values per lane

struct DecodeRow {
  float q[DECODE_VPL];    // this lane's columns of q, times the softmax scale
  float acc[DECODE_VPL];  // this lane's columns of sum_t e^(s_t - m) v_t
  float m, l;             // the running max and sum_t e^(s_t - m), the same in every lane
};

// Load query row q[0..D) times scale and start the online softmax: m = -inf, l = 0, acc = 0.
template <typename T>
__device__ __forceinline__ void decode_start(DecodeRow& r, const T* __restrict__ q, int D, float scale) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < DECODE_VPL; ++i) {
    const int d = lane + 32 * i;
    r.q[i] = d < D ? to_f32(q[d]) * scale : 0.0f;
    r.acc[i] = 0.0f;
  }
  r.m = -CUDART_INF_F;
  r.l = 0.0f;
}

// Return the score q . k of one token's K row (every lane gets it: the whole warp must call).
template <typename P>
__device__ __forceinline__ float decode_score(const DecodeRow& r, const P* k, int D) {
  const int lane = threadIdx.x & 31;
  float part = 0.0f;
#pragma unroll
  for (int i = 0; i < DECODE_VPL; ++i) {
    const int d = lane + 32 * i;
    if (d < D) part += r.q[i] * to_f32(k[d]);
  }
  return warp_sum(part);
}

// Fold one token of score s and V row v into (m, l, acc). The first token: e^(m - m') = e^-inf = 0.
template <typename P>
__device__ __forceinline__ void decode_fold(DecodeRow& r, float s, const P* v, int D) {
  const int lane = threadIdx.x & 31;
  const float m_new = fmaxf(r.m, s);
  const float alpha = expf(r.m - m_new);
  const float w = expf(s - m_new);
  r.l = r.l * alpha + w;
#pragma unroll
  for (int i = 0; i < DECODE_VPL; ++i) {
    const int d = lane + 32 * i;
    if (d < D) r.acc[i] = r.acc[i] * alpha + w * to_f32(v[d]);
  }
  r.m = m_new;
}

// Attend to pages [lo, hi) of one sequence of n tokens: for page p, one read of its id in the sequence's block-table
// row, then its valid slots (all `page` of them but in the last page, which holds n - p * page); token t's row of
// KV head kvh is k[((page_id * page + t % page) * Hkv + kvh) * D]. Entries past the last page are never read.
template <typename T>
__device__ __forceinline__ void decode_pages(DecodeRow& r, const T* __restrict__ k, const T* __restrict__ v,
                                             const int* __restrict__ table_row, int lo, int hi, int n, int page,
                                             int Hkv, int kvh, int D) {
  for (int p = lo; p < hi; ++p) {
    const size_t pid = (size_t)table_row[p];  // the gather: one block-table read per page
    const int slots = min(page, n - p * page);
    for (int t = 0; t < slots; ++t) {
      const size_t row = ((pid * page + t) * Hkv + kvh) * (size_t)D;
      decode_fold(r, decode_score(r, k + row, D), v + row, D);
    }
  }
}

// Write acc * inv to out[0..D) in out's type (the head's output, or an fp32 split-KV partial).
template <typename TO>
__device__ __forceinline__ void decode_store(const DecodeRow& r, float inv, TO* __restrict__ out, int D) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < DECODE_VPL; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[d] = from_f32<TO>(r.acc[i] * inv);
  }
}

// Export the kernel template NAME<T> with decode_attention's arguments as extern "C" NAME_<SFX> (with
// WB_EACH_DTYPE: one instance per dtype). q, out: [B, Hq, D]; k, v: [P, page, Hkv, D]; table: [B, maxp] int32;
// lens: [B] int32.
#define DECODE_EXPORT(NAME, SFX, T)                                                                                \
  extern "C" __global__ void NAME##_##SFX(const T* q, const T* k, const T* v, const int* table, const int* lens,   \
                                          T* out, int Hq, int Hkv, int D, int page, int maxp, float scale) {       \
    NAME<T>(q, k, v, table, lens, out, Hq, Hkv, D, page, maxp, scale);                                           \
  }
