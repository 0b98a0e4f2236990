// Block per row with 16-byte loads: one float4 load moves 4 floats or 8 halves/bf16 (LDG.128 on the GPU),
// four times the bytes per instruction of a scalar fp32 load. The row is read ONCE: each thread keeps up to
// ITEMS vectors in registers (1024 threads x 8 x 16 B = 128 KB: 32K fp32 or 64K fp16 elements), so the write
// pass needs no second read (2 bytes moved per element-byte: the minimum). Longer rows re-read the rest.
// A row starts on a 16-byte boundary only when N * sizeof(T) % 16 == 0, so each row peels a scalar head up to
// the boundary and a scalar tail after the last whole vector: any N works, including N = 1.
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

constexpr int ITEMS = 8;  // 16-byte vectors per thread held in registers (8 x 4 = 32 registers)

// x and y must share their alignment modulo 16 bytes (the host passes 16-byte aligned buffers).
template <typename T>
__device__ void softmax_vec(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    constexpr int VEC = 16 / sizeof(T);
    const T* row = x + (size_t)blockIdx.x * n;
    T* out = y + (size_t)blockIdx.x * n;
    int head = (int)(((16 - ((size_t)row & 15)) & 15) / sizeof(T));  // scalars before the 16-byte boundary
    if (head > n) head = n;
    int nvec = (n - head) / VEC;
    int tail = head + nvec * VEC;  // first element of the scalar tail
    const float4* vin = reinterpret_cast<const float4*>(row + head);
    float4* vout = reinterpret_cast<float4*>(out + head);

    float mx = -CUDART_INF_F, s = 0.0f;
    float4 cache[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {  // coalesced: consecutive threads read consecutive 16-byte vectors
        int i = threadIdx.x + k * blockDim.x;
        if (i < nvec) {
            cache[k] = vin[i];
            absorb<T>(mx, s, cache[k]);
        }
    }
    for (int i = threadIdx.x + ITEMS * blockDim.x; i < nvec; i += blockDim.x) absorb<T>(mx, s, vin[i]);
    for (int j = threadIdx.x; j < head; j += blockDim.x) merge(mx, s, load(row + j), 1.0f);
    for (int j = tail + threadIdx.x; j < n; j += blockDim.x) merge(mx, s, load(row + j), 1.0f);
    block_merge(mx, s);
    float inv = 1.0f / s;  // all -inf row: NaN everywhere, as torch

#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {  // write from registers: no second read
        int i = threadIdx.x + k * blockDim.x;
        if (i < nvec) vout[i] = normalise<T>(cache[k], mx, inv);
    }
    for (int i = threadIdx.x + ITEMS * blockDim.x; i < nvec; i += blockDim.x) vout[i] = normalise<T>(vin[i], mx, inv);
    for (int j = threadIdx.x; j < head; j += blockDim.x) store(out + j, expf(load(row + j) - mx) * inv);
    for (int j = tail + threadIdx.x; j < n; j += blockDim.x) store(out + j, expf(load(row + j) - mx) * inv);
}

extern "C" __global__ void softmax_vec_f32(const float* x, float* y, int m, int n) { softmax_vec(x, y, m, n); }
extern "C" __global__ void softmax_vec_f16(const __half* x, __half* y, int m, int n) { softmax_vec(x, y, m, n); }
extern "C" __global__ void softmax_vec_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_vec(x, y, m, n);
}
