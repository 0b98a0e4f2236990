// MoE routing, fused: softmax over the E experts and each token's top-k, one warp per token.
//
// Block = 32 x WARPS threads; threadIdx.y picks the token, so a block routes WARPS = 4 tokens (128 threads).
// Lane l of a warp owns experts l, l+32, l+64, ...: VPL = ceil(E/32) logits per lane, kept in registers as fp32
// (VPL is a template parameter in {1, 2, 4, 8, 16, 32}, so E <= 1024; the array is fully unrolled, never indexed
// with a runtime value, so it stays in registers instead of local memory). The row is read once, coalesced:
// load j of the 32 lanes touches 32 neighbouring elements (128 B at fp32, 64 B at fp16/bf16).
//
//   1. softmax statistics: the row max m (5 __shfl_xor_sync steps) and s = sum_e exp(x_e - m) (5 more);
//   2. top_k rounds of a warp argmax: every lane proposes its best expert not yet taken, then 5 butterfly steps
//      of (logit, id) pairs leave every lane holding the winner. Larger logit wins; equal logits go to the lower
//      expert id (the contract's tie rule). The selection compares logits, not probabilities: exp() is monotonic,
//      and comparing the inputs cannot merge two distinct logits into one rounded probability;
//   3. the winner's owner lane marks it taken (one bit per register slot), and the lane that owns output slot r
//      (lane r % 32) keeps its weight exp(x - m) in a register;
//   4. at the end each lane scales its slots by 1/sum of the chosen weights (renormalize) or 1/s (raw softmax
//      probabilities) and writes them: every output element is written once, by one lane, with no read-back.
//
// Napkin numbers (E = 256, top_k = 8, bf16 logits): 512 B read and 64 B written per token; the H200's 4.8 TB/s
// moves that for 16K tokens in ~2 us, while the 8 rounds cost 8 * (8 compares + 10 shuffles) per lane: small next
// to the launch (~3 us). The point of fusing is the [T, E] fp32 probabilities never touch memory (16 MiB at
// T = 16K, E = 256, written then read back by an unfused softmax + topk).
// ptxas (sm_90, no spills): 23 registers at VPL = 1, 48 at VPL = 8 (E <= 256), 79 at 16, 146 at 32 (E <= 1024:
// 3 blocks of 4 warps per SM), no shared memory.
// One warp per token leaves lanes idle when E < 32 (E = 8: 24 of 32 lanes hold only padding); that is cheap at
// these sizes, and packing 4 tokens per warp would only pay for routers with very few experts.
#include "../include/kernel_helpers.cuh"  // to_f32, warp_max, warp_sum, instance selection

#define WARPS 4              // tokens (warps) per block
#define NONE 0x7fffffff      // "no candidate" expert id: loses every comparison
#define FULL 0xffffffffu     // all 32 lanes take part in every shuffle

// Is (v, i) a better pick than (bv, bi)? A real candidate beats NONE; then the larger logit; equal logits: lower id.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

// logits [T, E] row-major; weights [T, k] fp32; ids [T, k] int32.
template <typename Tin, int VPL>
__device__ void moe_topk(const Tin* __restrict__ logits, float* __restrict__ weights, int* __restrict__ ids, int T,
                         int E, int k, int renormalize) {
  const int t = blockIdx.x * WARPS + threadIdx.y;
  if (t >= T) return;  // the whole warp leaves together: the shuffles below stay full-warp
  const int lane = threadIdx.x;
  const Tin* row = logits + (size_t)t * E;

  // 1. Load (padding: -inf, never selected: its id fails `e < E` below) and the softmax statistics.
  float x[VPL];
  float m = -CUDART_INF_F;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int e = j * 32 + lane;
    x[j] = e < E ? to_f32(row[e]) : -CUDART_INF_F;
    m = fmaxf(m, x[j]);
  }
  m = warp_max(m);  // 5 butterfly shuffles: every lane gets the row max
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    if (j * 32 + lane < E) s += expf(x[j] - m);
  s = warp_sum(s);  // same bits in every lane

  // 2.-3. top_k rounds of warp argmax.
  unsigned taken = 0;  // bit j: expert j*32 + lane is already chosen (VPL <= 32 bits)
  float w_mine[VPL];   // raw weight of output slot j*32 + lane (this lane writes it)
  int id_mine[VPL];
  float s_sel = 0.0f;  // sum of the chosen raw weights, identical in every lane
  for (int r = 0; r < k; ++r) {
    float bv = -CUDART_INF_F;
    int bi = NONE;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {  // j increases with the id, so `better` keeps the lower id on a tie
      const int e = j * 32 + lane;
      if (e < E && !((taken >> j) & 1u) && better(x[j], e, bv, bi)) {
        bv = x[j];
        bi = e;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {  // butterfly: after 5 steps every lane holds the warp's winner
      const float ov = __shfl_xor_sync(FULL, bv, off);
      const int oi = __shfl_xor_sync(FULL, bi, off);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);  // top_k <= E: a real winner exists every round
    const float w = expf(bv - m);                     // unnormalised probability of the winner
    s_sel += w;
#pragma unroll
    for (int j = 0; j < VPL; ++j)  // output slot r belongs to lane r % 32, register j = r / 32
      if (j * 32 + lane == r) {
        w_mine[j] = w;
        id_mine[j] = bi;
      }
  }

  // 4. Normalise and write: lane l writes slots l, l+32, ... (k <= E <= 32 * VPL, so j < VPL covers them all).
  const float inv = 1.0f / (renormalize ? s_sel : s);
  float* wrow = weights + (size_t)t * k;
  int* irow = ids + (size_t)t * k;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int r = j * 32 + lane;
    if (r < k) {
      wrow[r] = w_mine[j] * inv;
      irow[r] = id_mine[j];
    }
  }
}

// One extern "C" kernel per (logits per lane, dtype): moe_topk_v<VPL>_<f32|f16|bf16>, 18 in all (~15 s of nvcc
// on 2 cores). -DTOPK_ONLY_VPL=<VPL> and -DWB_ONLY_DT=<1 f32 | 2 f16 | 3 bf16> compile just one of them (the GPU
// launcher and wb.inspect do; the CPU engine builds them all at once).
#define MOE_TOPK(SUF, Tin, VPL)                                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * WARPS)                                                        \
      moe_topk_v##VPL##_##SUF(const Tin* logits, float* weights, int* ids, int T, int E, int k, int renormalize) { \
    moe_topk<Tin, VPL>(logits, weights, ids, T, E, k, renormalize);                                               \
  }
#ifndef TOPK_ONLY_VPL
#define TOPK_ONLY_VPL 0
#endif
#if WB_WANT(TOPK_ONLY_VPL, 1)
WB_EACH_DTYPE(MOE_TOPK, 1)
#endif
#if WB_WANT(TOPK_ONLY_VPL, 2)
WB_EACH_DTYPE(MOE_TOPK, 2)
#endif
#if WB_WANT(TOPK_ONLY_VPL, 4)
WB_EACH_DTYPE(MOE_TOPK, 4)
#endif
#if WB_WANT(TOPK_ONLY_VPL, 8)
WB_EACH_DTYPE(MOE_TOPK, 8)
#endif
#if WB_WANT(TOPK_ONLY_VPL, 16)
WB_EACH_DTYPE(MOE_TOPK, 16)
#endif
#if WB_WANT(TOPK_ONLY_VPL, 32)
WB_EACH_DTYPE(MOE_TOPK, 32)
#endif
