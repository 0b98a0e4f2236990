// GQA-grouped paged decode attention: one block per (sequence, KV head) serves all `group = Hq / Hkv` query heads
// that read that KV head, one warp each, so every page of K and V is read from global memory once per block
// instead of once per query head (decode_warp.cu reads it `group` times: 8x the traffic at Llama-3-70B's 64/8).
//
// Per chunk of up to TT slots of a page, the whole block stages K and V in shared memory as fp32 (thread i loads
// elements i, i + blockDim.x, ...: neighbouring threads, neighbouring columns), one __syncthreads, then each warp
// runs decode_warp.cu's online softmax over the chunk reading the shared rows (lane l: columns l, l + 32, ...:
// conflict-free), and a second __syncthreads before the next chunk overwrites the tiles.
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE
#include "../../include/decode_row.cuh"      // DecodeRow, decode_start/score/fold/store, DECODE_EXPORT

#define TT 16  // slots staged per chunk: 2 * 16 * 128 * 4 B = 16 KiB of shared memory

// Block: group warps (query heads kvh * group ... + group - 1). Grid (Hkv, B).
template <typename T>
__device__ void decode_gqa(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           const int* __restrict__ table, const int* __restrict__ lens, T* __restrict__ out, int Hq,
                           int Hkv, int D, int page, int maxp, float scale) {
  __shared__ float Ks[TT][DECODE_MAXD];
  __shared__ float Vs[TT][DECODE_MAXD];
  const int kvh = blockIdx.x, b = blockIdx.y;
  const int h = kvh * (Hq / Hkv) + threadIdx.x / 32;  // this warp's query head
  const int n = lens[b];
  DecodeRow r;
  decode_start(r, q + ((size_t)b * Hq + h) * D, D, scale);
  for (int p = 0; p < (n + page - 1) / page; ++p) {
    const size_t pid = (size_t)table[(size_t)b * maxp + p];
    const int slots = min(page, n - p * page);
    for (int s0 = 0; s0 < slots; s0 += TT) {
      const int cnt = min(TT, slots - s0);
      for (int e = threadIdx.x; e < cnt * D; e += blockDim.x) {  // the block stages the chunk once
        const int t = e / D, d = e % D;
        const size_t at = ((pid * page + s0 + t) * Hkv + kvh) * (size_t)D + d;
        Ks[t][d] = to_f32(k[at]);
        Vs[t][d] = to_f32(v[at]);
      }
      __syncthreads();
      for (int t = 0; t < cnt; ++t) decode_fold(r, decode_score(r, Ks[t], D), Vs[t], D);  // each warp its head
      __syncthreads();  // every warp is done with the tiles before the next chunk overwrites them
    }
  }
  decode_store(r, 1.0f / r.l, out + ((size_t)b * Hq + h) * D, D);
}

#define DECODE_GQA(SFX, T, ...) DECODE_EXPORT(decode_gqa, SFX, T)
WB_EACH_DTYPE(DECODE_GQA)
