// LayerNorm, warp per row, Welford: each lane folds its elements (l, l + 32, ...) into a (count, mean, M2) state
// with Welford's update, five butterfly shuffles merge the 32 states (welford.cuh), and a second sweep writes y.
// One read for the statistics instead of two, and no sum of raw values: the merge works on differences from means.
#include "../../include/kernel_helpers.cuh"  // load/store, WB_EACH_DTYPE
#include "welford.cuh"                        // Welford, welford_push, warp_welford

template <typename T>
__device__ void layernorm_welford(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                  T* __restrict__ y, int m, int n, float eps) {
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= m) return;  // a whole warp leaves together
    int lane = threadIdx.x;
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    Welford s = {0.0f, 0.0f, 0.0f};
    for (int j = lane; j < n; j += 32) welford_push(s, load(row + j));
    s = warp_welford(s);  // every lane: the row's (n, mean, M2)
    float rstd = rsqrtf(s.m2 / n + eps);
    for (int j = lane; j < n; j += 32) store(out + j, (load(row + j) - s.mean) * rstd * load(w + j) + load(b + j));
}

#define LAYERNORM_WELFORD(SFX, T, ...)                                                                         \
    extern "C" __global__ void layernorm_welford_##SFX(const T* x, const T* w, const T* b, T* y, int m, int n, \
                                                       float eps) {                                            \
        layernorm_welford(x, w, b, y, m, n, eps);                                                              \
    }
WB_EACH_DTYPE(LAYERNORM_WELFORD)
