// GQA-grouped paged decode attention: one block per (sequence, KV head) serves all `group = Hq / Hkv` query heads
// that read that KV head, one warp each, so every page of K and V is read from global memory once per block
// instead of once per query head (decode_warp.cu reads it `group` times: 8x the traffic at Llama-3-70B's 64/8).
//
// Per chunk of up to TT slots of a page, the whole block stages K and V in shared memory as fp32 (thread i loads
// elements i, i + blockDim.x, ...: neighbouring threads, neighbouring columns), one __syncthreads, then each warp
// runs decode_warp.cu's online softmax over the chunk reading the shared rows (lane l: columns l, l + 32, ...:
// conflict-free), and a second __syncthreads before the next chunk overwrites the tiles.
#include "../../include/kernel_helpers.cuh"  // to_f32, from_f32, warp_sum, WB_EACH_DTYPE

#define MAXD 128
#define VPL (MAXD / 32)
#define TT 16  // slots staged per chunk: 2 * 16 * 128 * 4 B = 16 KiB of shared memory

// Block: group warps (query heads kvh * group ... + group - 1). Grid (Hkv, B).
template <typename T>
__device__ void decode_gqa(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           const int* __restrict__ table, const int* __restrict__ lens, T* __restrict__ out, int Hq,
                           int Hkv, int D, int page, int maxp, float scale) {
  __shared__ float Ks[TT][MAXD];
  __shared__ float Vs[TT][MAXD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int kvh = blockIdx.x, b = blockIdx.y;
  const int group = Hq / Hkv;
  const int h = kvh * group + warp;  // this warp's query head
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
      for (int t = 0; t < cnt; ++t) {  // every warp: its own query head over the shared rows
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
          const int d = lane + 32 * i;
          if (d < D) part += qr[i] * Ks[t][d];
        }
        const float sc = warp_sum(part);
        const float m_new = fmaxf(m, sc);
        const float alpha = expf(m - m_new);
        const float w = expf(sc - m_new);
        l = l * alpha + w;
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
          const int d = lane + 32 * i;
          if (d < D) acc[i] = acc[i] * alpha + w * Vs[t][d];
        }
        m = m_new;
      }
      __syncthreads();  // every warp is done with the tiles before the next chunk overwrites them
    }
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[((size_t)b * Hq + h) * D + d] = from_f32<T>(acc[i] * inv);
  }
}

#define DECODE_GQA(SFX, T, ...)                                                                                    \
  extern "C" __global__ void decode_gqa_##SFX(const T* q, const T* k, const T* v, const int* table,              \
                                              const int* lens, T* out, int Hq, int Hkv, int D, int page,          \
                                              int maxp, float scale) {                                            \
    decode_gqa<T>(q, k, v, table, lens, out, Hq, Hkv, D, page, maxp, scale);                                      \
  }
WB_EACH_DTYPE(DECODE_GQA)
