// Warp per row: the 32 lanes of a warp stride over one row together (coalesced: 32 neighbours per load),
// each lane keeps an online (m, s) pair, and five butterfly shuffles (__shfl_xor_sync) merge the 32 pairs
// in registers: no shared memory, no __syncthreads. Block = 32 x ROWS threads: threadIdx.y picks the row.
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

template <typename T>
__device__ void softmax_warp(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= m) return;  // a whole warp leaves together: the shuffles below stay full-warp
    int lane = threadIdx.x;
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    float mx = -CUDART_INF_F, s = 0.0f;
    for (int j = lane; j < n; j += 32) merge(mx, s, load(row + j), 1.0f);  // lane j: elements j, j+32, ...
    for (int off = 16; off > 0; off >>= 1) {  // butterfly: after 5 steps every lane holds the row's (max, sum)
        float om = __shfl_xor_sync(0xffffffffu, mx, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(mx, s, om, os);
    }
    float inv = 1.0f / s;
    for (int j = lane; j < n; j += 32) store(out + j, expf(load(row + j) - mx) * inv);
}

extern "C" __global__ void softmax_warp_f32(const float* x, float* y, int m, int n) { softmax_warp(x, y, m, n); }
extern "C" __global__ void softmax_warp_f16(const __half* x, __half* y, int m, int n) { softmax_warp(x, y, m, n); }
extern "C" __global__ void softmax_warp_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_warp(x, y, m, n);
}
