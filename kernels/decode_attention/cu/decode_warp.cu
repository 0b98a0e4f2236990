// Paged decode attention, one warp per (sequence, query head): the block-table gather in its plainest form.
//
// Warp (b, h) walks sequence b's pages in order. For page p it reads the page id block_table[b, p] once, then the
// page's valid slots (all `page` of them but in the last page, which holds seq_len - p * page): token t lives at
// k_cache[page_id, t % page, kv_head, :]. The 32 lanes split the head dim (lane l holds columns l, l + 32, ...),
// so one token's row is one coalesced read per 32 columns; a butterfly warp_sum gives every lane the score
// s = scale * q . k, and an online softmax keeps (m, l, acc) in registers: m' = max(m, s),
// l = l * e^(m - m') + e^(s - m'), acc = acc * e^(m - m') + e^(s - m') v. No shared memory, no barriers.
// GQA: query head h reads KV head h / (Hq / Hkv): the `group` warps of one KV head each read its pages again
// (decode_gqa.cu reads each page once per block). Entries of the block table past the sequence's last page are
// never read: they hold junk page ids.
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE

#define MAXD 128          // head dims up to 128: 4 columns per lane
#define VPL (MAXD / 32)   // values per lane

// q, out: [B, Hq, D]; k, v: [P, page, Hkv, D]; table: [B, maxp] int32; lens: [B] int32.
template <typename T>
__device__ void decode_warp(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                            const int* __restrict__ table, const int* __restrict__ lens, T* __restrict__ out,
                            int Hq, int Hkv, int D, int page, int maxp, float scale) {
  const int lane = threadIdx.x & 31;
  const int h = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int b = blockIdx.y;
  if (h >= Hq) return;  // a whole warp leaves together: its shuffles stay full-warp
  const int kvh = h / (Hq / Hkv);
  const int n = lens[b];
  float qr[VPL], acc[VPL];
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? to_f32(q[((size_t)b * Hq + h) * D + d]) * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -CUDART_INF_F, l = 0.0f;
  const int n_pages = (n + page - 1) / page;
  for (int p = 0; p < n_pages; ++p) {
    const size_t pid = (size_t)table[(size_t)b * maxp + p];  // the gather: one block-table read per page
    const int slots = min(page, n - p * page);               // the last page may be partly filled
    for (int s = 0; s < slots; ++s) {
      const size_t row = ((pid * page + s) * Hkv + kvh) * (size_t)D;
      float part = 0.0f;
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int d = lane + 32 * i;
        if (d < D) part += qr[i] * to_f32(k[row + d]);
      }
      const float sc = warp_sum(part);  // every lane: the token's score
      const float m_new = fmaxf(m, sc);
      const float alpha = expf(m - m_new);  // first token: e^-inf = 0
      const float w = expf(sc - m_new);
      l = l * alpha + w;
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int d = lane + 32 * i;
        if (d < D) acc[i] = acc[i] * alpha + w * to_f32(v[row + d]);
      }
      m = m_new;
    }
  }
  const float inv = 1.0f / l;  // seq_len >= 1: l >= 1
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[((size_t)b * Hq + h) * D + d] = from_f32<T>(acc[i] * inv);
  }
}

#define DECODE_WARP(SFX, T, ...)                                                                                   \
  extern "C" __global__ void decode_warp_##SFX(const T* q, const T* k, const T* v, const int* table,              \
                                               const int* lens, T* out, int Hq, int Hkv, int D, int page,        \
                                               int maxp, float scale) {                                          \
    decode_warp<T>(q, k, v, table, lens, out, Hq, Hkv, D, page, maxp, scale);                                     \
  }
WB_EACH_DTYPE(DECODE_WARP)
