// Block per row, for long rows: up to 1024 threads share one row. Each thread keeps an online (m, s) over the
// elements tid, tid + blockDim, ... (coalesced); a warp merges its 32 pairs with shuffles, warp leaders put
// one pair each in shared memory, warp 0 merges those, and every thread reads the row's (max, sum) back.
// Two __syncthreads: after the leaders write, and after warp 0 publishes. Then a write pass (re-reads the row:
// 2 reads + 1 write; for rows of <= 64K fp32 the second read mostly hits L2).
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

template <typename T>
__device__ void softmax_block(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    const T* row = x + (size_t)blockIdx.x * n;  // grid = m blocks: one row each
    T* out = y + (size_t)blockIdx.x * n;
    float mx = -CUDART_INF_F, s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) merge(mx, s, load(row + j), 1.0f);
    block_merge(mx, s);
    float inv = 1.0f / s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) store(out + j, expf(load(row + j) - mx) * inv);
}

extern "C" __global__ void softmax_block_f32(const float* x, float* y, int m, int n) { softmax_block(x, y, m, n); }
extern "C" __global__ void softmax_block_f16(const __half* x, __half* y, int m, int n) { softmax_block(x, y, m, n); }
extern "C" __global__ void softmax_block_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_block(x, y, m, n);
}
