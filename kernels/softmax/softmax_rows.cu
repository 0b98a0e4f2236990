// Several rows per block, for short rows (N <= ~2K): each warp owns one row, a block of 32 x ROWS threads
// handles ROWS rows. 16-byte loads, the row held in registers (up to 32 lanes x ITEMS vectors: 1K fp32 or 2K fp16
// elements; longer rows re-read the rest) and shuffle-only reductions: no shared memory, no __syncthreads, and
// enough rows per block that a 1K-element row still gives the SM full blocks of work.
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

constexpr int ITEMS = 8;  // 16-byte vectors per lane in registers: 32 x 8 x 16 B = 4 KB per row

template <typename T>
__device__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    constexpr int VEC = 16 / sizeof(T);
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= m) return;  // whole warps leave together
    int lane = threadIdx.x;
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    int head = (int)(((16 - ((size_t)row & 15)) & 15) / sizeof(T));
    if (head > n) head = n;
    int nvec = (n - head) / VEC;
    int tail = head + nvec * VEC;
    const float4* vin = reinterpret_cast<const float4*>(row + head);
    float4* vout = reinterpret_cast<float4*>(out + head);

    float mx = -CUDART_INF_F, s = 0.0f;
    float4 cache[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = lane + 32 * k;
        if (i < nvec) {
            cache[k] = vin[i];
            absorb<T>(mx, s, cache[k]);
        }
    }
    for (int i = lane + 32 * ITEMS; i < nvec; i += 32) absorb<T>(mx, s, vin[i]);
    if (lane < head) merge(mx, s, load(row + lane), 1.0f);  // head < VEC <= 8 elements
    for (int j = tail + lane; j < n; j += 32) merge(mx, s, load(row + j), 1.0f);
    warp_merge(mx, s);
    float inv = 1.0f / s;

#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = lane + 32 * k;
        if (i < nvec) vout[i] = normalise<T>(cache[k], mx, inv);
    }
    for (int i = lane + 32 * ITEMS; i < nvec; i += 32) vout[i] = normalise<T>(vin[i], mx, inv);
    if (lane < head) store(out + lane, expf(load(row + lane) - mx) * inv);
    for (int j = tail + lane; j < n; j += 32) store(out + j, expf(load(row + j) - mx) * inv);
}

extern "C" __global__ void softmax_rows_f32(const float* x, float* y, int m, int n) { softmax_rows(x, y, m, n); }
extern "C" __global__ void softmax_rows_f16(const __half* x, __half* y, int m, int n) { softmax_rows(x, y, m, n); }
extern "C" __global__ void softmax_rows_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_rows(x, y, m, n);
}
