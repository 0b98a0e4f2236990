// The given kernel of exercise decode-gqa-map: paged decode attention (fp32), one warp per (query head, sequence),
// around the learner's kv_head.
//
// Not a file of its own: kernels/decode_attention/ex_common.py appends it to the exercise's source (the SOURCE of
// ex_gqa_solution.py), after the __device__ function it calls, and NVRTC (gpu mode) or the CPU engine compiles the
// whole.

#include <math_constants.h>

#define LANE_COLS 4  // head dims up to 4 * 32 = 128: lane l holds columns l, l + 32, l + 64, l + 96

// grid (Hq, B), 32 threads. q, out: [B, Hq, D]; k, v: [P, page, Hkv, D]; table: [B, maxp]; lens: [B].
// Token t of sequence b sits in slot t % page of page table[b, t / page]; its row of KV head kvh is
// k[((slot of the pool) * Hkv + kvh) * D ...]. An online softmax over the tokens keeps (mx, sum, acc) in registers.
extern "C" __global__ void decode_gqa_map(const float* q, const float* k, const float* v, const int* table,
                                          const int* lens, float* out, int Hq, int Hkv, int D, int page, int maxp,
                                          float scale) {
    const int h = blockIdx.x, b = blockIdx.y, lane = threadIdx.x;
    const int kvh = kv_head(h, Hq, Hkv);  // the learner's GQA mapping: which KV head query head h reads
    const float* qh = q + ((size_t)b * Hq + h) * D;
    float qr[LANE_COLS], acc[LANE_COLS];
    for (int j = 0; j < LANE_COLS; ++j) {
        const int c = lane + 32 * j;
        qr[j] = c < D ? qh[c] * scale : 0.0f;
        acc[j] = 0.0f;
    }
    float mx = -CUDART_INF_F, sum = 0.0f;
    for (int t = 0; t < lens[b]; ++t) {
        const size_t slot = (size_t)table[(size_t)b * maxp + t / page] * page + t % page;
        const size_t at = (slot * Hkv + kvh) * D;
        float s = 0.0f;
        for (int j = 0; j < LANE_COLS; ++j)
            if (lane + 32 * j < D) s += qr[j] * k[at + lane + 32 * j];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);  // every lane: q . k
        const float grown = fmaxf(mx, s);
        const float shrink = expf(mx - grown), p = expf(s - grown);  // first token: e^-inf = 0
        sum = sum * shrink + p;
        for (int j = 0; j < LANE_COLS; ++j)
            if (lane + 32 * j < D) acc[j] = acc[j] * shrink + p * v[at + lane + 32 * j];
        mx = grown;
    }
    for (int j = 0; j < LANE_COLS; ++j)
        if (lane + 32 * j < D) out[((size_t)b * Hq + h) * D + lane + 32 * j] = acc[j] / sum;
}
