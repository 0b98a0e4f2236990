// LayerNorm, warp per row, two passes: the 32 lanes of a warp stride over one row together (lane l reads l, l + 32,
// ...: coalesced), warp_sum gives every lane the row's sum (the mean), then the sum of (x - mean)^2 (the biased
// variance), and a third sweep writes y = (x - mean) * rstd * w + b. The row is read three times; past the first,
// the reads hit L1/L2. Block = 32 x ROWS threads: threadIdx.y picks the row.
#include "../../include/kernel_helpers.cuh"  // load/store, warp_sum, WB_EACH_DTYPE

template <typename T>
__device__ void layernorm_warp(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                               T* __restrict__ y, int m, int n, float eps) {
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= m) return;  // a whole warp leaves together: the shuffles below stay full-warp
    int lane = threadIdx.x;
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    float s = 0.0f;
    for (int j = lane; j < n; j += 32) s += load(row + j);
    float mean = warp_sum(s) / n;
    float ss = 0.0f;
    for (int j = lane; j < n; j += 32) {
        float d = load(row + j) - mean;
        ss += d * d;
    }
    float rstd = rsqrtf(warp_sum(ss) / n + eps);  // biased variance; eps inside the square root
    for (int j = lane; j < n; j += 32) store(out + j, (load(row + j) - mean) * rstd * load(w + j) + load(b + j));
}

#define LAYERNORM_WARP(SFX, T, ...)                                                                          \
    extern "C" __global__ void layernorm_warp_##SFX(const T* x, const T* w, const T* b, T* y, int m, int n,  \
                                                    float eps) {                                             \
        layernorm_warp(x, w, b, y, m, n, eps);                                                               \
    }
WB_EACH_DTYPE(LAYERNORM_WARP)
