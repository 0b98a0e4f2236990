// LayerNorm, block per row, for wide rows: up to the architecture's thread limit share one row (the launcher picks
// blockDim.x from the arch table). Two passes, each reduced across the block by block_sum (warp shuffles, one
// shared slot per warp, warp 0 sums the slots): the mean, then the biased variance; a third sweep writes y.
#include "../../include/kernel_helpers.cuh"  // load/store, block_sum, WB_EACH_DTYPE

template <typename T>
__device__ void layernorm_block(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                T* __restrict__ y, int n, float eps) {
    const T* row = x + (size_t)blockIdx.x * n;  // grid = M blocks: one row each
    T* out = y + (size_t)blockIdx.x * n;
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += load(row + j);
    float mean = block_sum(s) / n;
    __syncthreads();  // block_sum reuses its shared slots: every thread has read the sum before they are rewritten
    float ss = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float d = load(row + j) - mean;
        ss += d * d;
    }
    float rstd = rsqrtf(block_sum(ss) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        store(out + j, (load(row + j) - mean) * rstd * load(w + j) + load(b + j));
}

#define LAYERNORM_BLOCK(SFX, T, ...)                                                                          \
    extern "C" __global__ void layernorm_block_##SFX(const T* x, const T* w, const T* b, T* y, int n, float eps) { \
        layernorm_block(x, w, b, y, n, eps);                                                                  \
    }
WB_EACH_DTYPE(LAYERNORM_BLOCK)
