// Residual add fused into RMSNorm, block per row: s = x + r (rounded to T, stored: the new residual), then
// y = s * rsqrt(mean(s^2) + eps) * w with the sum of squares in fp32 (block_sum: warp shuffles, then shared memory).
// Each thread keeps its first ITEMS elements of s in registers between the two passes, so a row of up to
// ITEMS * blockDim.x elements is read from DRAM once; a longer row re-reads the sum this thread stored (its own
// writes: no other thread touches them, so no barrier is needed between the store and the load).
#include "../include/kernel_helpers.cuh"  // load/store, block_sum, WB_EACH_DTYPE

constexpr int ITEMS = 8;  // elements of s per thread held in registers

template <typename T>
__device__ void add_rmsnorm(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                            T* __restrict__ y, T* __restrict__ s, int n, float eps) {
    const size_t base = (size_t)blockIdx.x * n;
    float keep[ITEMS];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int j = threadIdx.x + k * blockDim.x;
        keep[k] = 0.0f;
        if (j < n) {
            T sum = from_f32<T>(load(x + base + j) + load(r + base + j));  // rounded as torch rounds x + r
            s[base + j] = sum;
            keep[k] = to_f32(sum);
            ss += keep[k] * keep[k];
        }
    }
    for (int j = threadIdx.x + ITEMS * blockDim.x; j < n; j += blockDim.x) {
        T sum = from_f32<T>(load(x + base + j) + load(r + base + j));
        s[base + j] = sum;
        float v = to_f32(sum);
        ss += v * v;
    }
    const float rstd = rsqrtf(block_sum(ss) / n + eps);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int j = threadIdx.x + k * blockDim.x;
        if (j < n) store(y + base + j, keep[k] * rstd * load(w + j));
    }
    for (int j = threadIdx.x + ITEMS * blockDim.x; j < n; j += blockDim.x)
        store(y + base + j, load(s + base + j) * rstd * load(w + j));
}

#define ADD_RMSNORM(SUF, T, _)                                                                             \
    extern "C" __global__ void add_rmsnorm_##SUF(const T* x, const T* r, const T* w, T* y, T* s, int n, \
                                                 float eps) {                                           \
        add_rmsnorm<T>(x, r, w, y, s, n, eps);                                                          \
    }
WB_EACH_DTYPE(ADD_RMSNORM, 0)
