// Naive softmax: one thread per row, three passes over the row (max, sum of exp, write).
// Thread r walks row r alone, so the 32 lanes of a warp read 32 addresses N elements apart: no coalescing,
// and the row is read three times. Correct (max-subtracted, fp32 accumulation), but slow.
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

template <typename T>
__device__ void softmax_naive(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) return;  // the last block is partial when m % blockDim.x != 0
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    float mx = -CUDART_INF_F;
    for (int j = 0; j < n; ++j) mx = fmaxf(mx, load(row + j));  // pass 1: the max (no overflow in exp)
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += expf(load(row + j) - mx);  // pass 2: sum of exp; all -inf row: NaN
    float inv = 1.0f / s;
    for (int j = 0; j < n; ++j) store(out + j, expf(load(row + j) - mx) * inv);  // pass 3: write
}

extern "C" __global__ void softmax_naive_f32(const float* x, float* y, int m, int n) { softmax_naive(x, y, m, n); }
extern "C" __global__ void softmax_naive_f16(const __half* x, __half* y, int m, int n) { softmax_naive(x, y, m, n); }
extern "C" __global__ void softmax_naive_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_naive(x, y, m, n);
}
