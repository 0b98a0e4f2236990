// Rotary position embedding, one block per token (b, s): the block's threads stride over the token's H * D/2
// pairs. Pair i of a head is rotated by pos * inv_freq_i, inv_freq_i = theta^(-2i/D) = exp2(-(2i/D) log2 theta),
// with the angle, cos and sin in fp32 (sincosf: full-range reduction, accurate at angles of thousands of radians;
// __sincosf would not be). interleaved = 0: GPT-NeoX rotate-half, pairs (i, i + D/2); 1: GPT-J, pairs (2i, 2i + 1).
#include "../include/kernel_helpers.cuh"  // load/store, WB_EACH_DTYPE

template <typename T>
__device__ void rope(const T* __restrict__ x, const int* __restrict__ positions, T* __restrict__ y, int H, int D,
                     float log2_theta, int interleaved) {
    const int half = D / 2;
    const size_t token = blockIdx.x;
    const float pos = (float)positions[token];
    const T* xt = x + token * H * D;
    T* yt = y + token * H * D;
    for (int p = threadIdx.x; p < H * half; p += blockDim.x) {
        const int h = p / half, i = p % half;
        const float inv_freq = exp2f(-(float)(2 * i) / (float)D * log2_theta);
        float s, c;
        sincosf(pos * inv_freq, &s, &c);
        const int first = interleaved ? 2 * i : i;
        const int second = interleaved ? 2 * i + 1 : i + half;
        const float a = load(xt + h * D + first), b = load(xt + h * D + second);
        store(yt + h * D + first, a * c - b * s);
        store(yt + h * D + second, b * c + a * s);
    }
}

#define ROPE(SUF, T, _)                                                                                         \
    extern "C" __global__ void rope_##SUF(const T* x, const int* positions, T* y, int H, int D, float log2_theta, \
                                          int interleaved) {                                                    \
        rope<T>(x, positions, y, H, D, log2_theta, interleaved);                                                \
    }
WB_EACH_DTYPE(ROPE, 0)
