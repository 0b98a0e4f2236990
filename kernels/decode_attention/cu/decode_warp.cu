// Paged decode attention, one warp per (sequence, query head): the block-table gather in its plainest form.
//
// Warp (b, h) walks sequence b's pages in order (decode_pages). For page p it reads the page id block_table[b, p]
// once, then the page's valid slots (all `page` of them but in the last page, which holds seq_len - p * page):
// token t lives at k_cache[page_id, t % page, kv_head, :]. The 32 lanes split the head dim (lane l holds columns
// l, l + 32, ...), so one token's row is one coalesced read per 32 columns; a butterfly warp_sum gives every lane
// the score s = scale * q . k, and an online softmax keeps (m, l, acc) in registers: m' = max(m, s),
// l = l * e^(m - m') + e^(s - m'), acc = acc * e^(m - m') + e^(s - m') v (decode_row.cuh). No shared memory, no
// barriers. GQA: query head h reads KV head h / (Hq / Hkv): the `group` warps of one KV head each read its pages
// again (decode_gqa.cu reads each page once per block). Entries of the block table past the sequence's last page
// are never read: they hold junk page ids.
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE
#include "../../include/decode_row.cuh"      // DecodeRow, decode_start/pages/store, DECODE_EXPORT

// Grid (ceil(Hq / warps), B); a block's warps are consecutive query heads of one sequence.
template <typename T>
__device__ void decode_warp(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                            const int* __restrict__ table, const int* __restrict__ lens, T* __restrict__ out,
                            int Hq, int Hkv, int D, int page, int maxp, float scale) {
  const int h = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int b = blockIdx.y;
  if (h >= Hq) return;  // a whole warp leaves together: its shuffles stay full-warp
  const int n = lens[b];
  DecodeRow r;
  decode_start(r, q + ((size_t)b * Hq + h) * D, D, scale);
  decode_pages(r, k, v, table + (size_t)b * maxp, 0, (n + page - 1) / page, n, page, Hkv, h / (Hq / Hkv), D);
  decode_store(r, 1.0f / r.l, out + ((size_t)b * Hq + h) * D, D);  // seq_len >= 1: l >= 1
}

#define DECODE_WARP(SFX, T, ...) DECODE_EXPORT(decode_warp, SFX, T)
WB_EACH_DTYPE(DECODE_WARP)
