// FlashAttention forward in SIMT CUDA C (no tensor cores): O = softmax(scale * Q K^T, causal mask) V without
// ever storing the Sq x Sk score matrix (O(N) memory).
//
// Block: BR = 32 query rows of one (batch, head) x G = 4 threads per row = 128 threads (4 warps, 8 rows each).
// Thread (row r, lane g of its group) keeps in registers the q and o entries of its columns: chunks of 4 columns,
// chunk index g + G*i, so the G lanes of a row read 4 neighbouring 16-byte chunks of a shared K/V row
// (conflict-free LDS.128; the 8 rows of a warp read the same address: broadcast).
// Per key tile of BC = 32 keys:
//   1. all 128 threads stage K[c0:c0+32, :] and V[c0:c0+32, :] in shared memory as fp32 (zero padded);
//   2. each thread computes its partial dot products q . k_j over its columns; two __shfl_xor_sync (lane masks 1, 2)
//      finish them, so all 4 lanes of a row hold the scores s[j] (registers; KS = 32 keys at a time, 16 at HD = 128);
//   3. online softmax in fp32, KS keys at a time: m' = max(m, max_j s_j), l = l*2^(m-m') + sum_j 2^(s_j-m'),
//      o = o*2^(m-m') + sum_j 2^(s_j-m') v_j (scale*log2(e) is folded into q, so exp2f does the exponentials);
//   4. after the last tile o / l goes to global memory in the input dtype.
// Napkin numbers, HD = 128: shared K+V tiles 2 * 32 * 128 * 4 B = 32 KiB per block; per tile the block does
// 2 * 32 * 32 * 128 * 2 = 524,288 FLOP (QK^T and PV) on 32 KiB staged: 16 FLOP per byte from global memory at fp32
// (32 at fp16), since K and V are read ceil(Sq/32) times per head. Registers per thread at HD = 128: q 32 + o 32 +
// s 16 fp32; ptxas (sm_90): 154 registers, no spills -> 3 blocks (12 warps) per SM.
// Causal (top-left aligned, key j visible to query i iff j <= i): tiles starting after the block's last query row
// are fully masked and skipped; the diagonal tile masks element-wise. Any Sq, Sk (ragged tiles are masked); the
// head dim D is padded with zeros to the compiled HD in {16, 32, 64, 128}, so any 1 <= D <= 128 runs.
#include "../include/kernel_helpers.cuh"  // to_f32, from_f32, instance selection

#define BR 32  // query rows per block
#define G 4    // threads per query row
#define BC 32  // keys per K/V tile

// q, k, v, o: [BH, S, D] row-major (B and H flattened). scale_log2 = scale * log2(e).
template <typename T, int HD>
__device__ void attn_flash_simt(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                T* __restrict__ o, int Sq, int Sk, int D, float scale_log2, int causal) {
  constexpr int NC = HD / 4 / G;  // 16-byte column chunks per thread (HD = 128: 8 chunks = 32 columns)
  constexpr int KS = HD >= 128 ? 16 : 32;  // keys per softmax step: q 32 + o 32 + s 16 fp32 registers at HD = 128
  __shared__ __align__(16) float Ks[BC][HD];
  __shared__ __align__(16) float Vs[BC][HD];

  const int tid = threadIdx.x, r = tid / G, g = tid % G;
  const int r0 = blockIdx.x * BR, i = r0 + r;  // this thread's query row
  const size_t head = (size_t)blockIdx.y;
  const T* qh = q + head * Sq * D;
  const T* kh = k + head * Sk * D;
  const T* vh = v + head * Sk * D;

  float qr[NC * 4], acc[NC * 4];  // this thread's columns of q (pre-scaled) and of the unnormalised output
#pragma unroll
  for (int c = 0; c < NC; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int col = (g + G * c) * 4 + e;
      qr[c * 4 + e] = (i < Sq && col < D) ? to_f32(qh[(size_t)i * D + col]) * scale_log2 : 0.0f;
      acc[c * 4 + e] = 0.0f;
    }
  float m = -CUDART_INF_F, l = 0.0f;  // running max (log2 units) and running sum of this row

  const int kend = causal ? min(Sk, r0 + BR) : Sk;  // causal: keys past the block's last row are masked for all
  for (int c0 = 0; c0 < kend; c0 += BC) {
    const int n = min(BC, Sk - c0);  // keys in this tile (the last one may be ragged)
    for (int e = tid; e < BC * HD; e += BR * G) {  // 128 threads stage 2 x 32 x HD elements, coalesced along D
      int jj = e / HD, col = e % HD;
      bool in = jj < n && col < D;
      Ks[jj][col] = in ? to_f32(kh[(size_t)(c0 + jj) * D + col]) : 0.0f;
      Vs[jj][col] = in ? to_f32(vh[(size_t)(c0 + jj) * D + col]) : 0.0f;
    }
    __syncthreads();  // the tiles are complete before anyone reads them

#pragma unroll 1
    for (int k0 = 0; k0 < BC; k0 += KS) {  // KS keys per online-softmax step: s[KS] stays in registers
      float s[KS];
      float mt = -CUDART_INF_F;
#pragma unroll
      for (int jj = 0; jj < KS; ++jj) {
        float part = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          float4 kv = *reinterpret_cast<const float4*>(&Ks[k0 + jj][(g + G * c) * 4]);
          part += qr[c * 4] * kv.x + qr[c * 4 + 1] * kv.y + qr[c * 4 + 2] * kv.z + qr[c * 4 + 3] * kv.w;
        }
        part += __shfl_xor_sync(0xffffffffu, part, 1);  // the G = 4 lanes of a row are neighbours in the warp
        part += __shfl_xor_sync(0xffffffffu, part, 2);  // commutative adds: all 4 lanes get the same bits
        bool visible = k0 + jj < n && (!causal || c0 + k0 + jj <= i);
        s[jj] = visible ? part : -CUDART_INF_F;
        mt = fmaxf(mt, s[jj]);
      }
      const float m_new = fmaxf(m, mt);
      const float m_use = m_new == -CUDART_INF_F ? 0.0f : m_new;  // no visible key yet: avoid (-inf) - (-inf)
      const float alpha = exp2f(m - m_use);  // rescales the old l and o to the new max; 0 on the first step
      l *= alpha;
#pragma unroll
      for (int c = 0; c < NC * 4; ++c) acc[c] *= alpha;
#pragma unroll
      for (int jj = 0; jj < KS; ++jj) {
        float p = exp2f(s[jj] - m_use);  // masked: exp2(-inf) = 0
        l += p;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          float4 vv = *reinterpret_cast<const float4*>(&Vs[k0 + jj][(g + G * c) * 4]);
          acc[c * 4] += p * vv.x;
          acc[c * 4 + 1] += p * vv.y;
          acc[c * 4 + 2] += p * vv.z;
          acc[c * 4 + 3] += p * vv.w;
        }
      }
      m = m_new;
    }
    __syncthreads();  // everyone is done with this tile before the next one overwrites it
  }

  if (i < Sq) {
    const float inv = 1.0f / l;  // l >= 1: key 0 is visible to every row (Sk >= 1 is checked on the host)
    T* orow = o + head * Sq * D + (size_t)i * D;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int col = (g + G * c) * 4 + e;
        if (col < D) orow[col] = from_f32<T>(acc[c * 4 + e] * inv);
      }
  }
}

// One extern "C" kernel per (padded head dim, dtype): attn_flash_simt_d<HD>_<f32|f16|bf16>, 12 in all (~20 s of
// nvcc on 2 cores). -DWB_ONLY_HD=<HD> and -DWB_ONLY_DT=<1 f32 | 2 f16 | 3 bf16> compile just one of them
// (the GPU launcher and wb.inspect do; the CPU engine builds them all at once).
#define ATTN_SIMT(SUF, T, HD)                                                                                     \
  extern "C" __global__ void __launch_bounds__(BR * G)                                                            \
      attn_flash_simt_d##HD##_##SUF(const T* q, const T* k, const T* v, T* o, int Sq, int Sk, int D,              \
                                    float scale_log2, int causal) {                                               \
    attn_flash_simt<T, HD>(q, k, v, o, Sq, Sk, D, scale_log2, causal);                                            \
  }
WB_EACH_HEAD_DIM(WB_EACH_DTYPE, ATTN_SIMT)
