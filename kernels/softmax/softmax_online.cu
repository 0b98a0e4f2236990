// Online softmax: one thread per row, max and sum in ONE pass, then a write pass (2 reads + 1 write per element).
// The running pair (m, s) = (max so far, sum of exp(x - m) so far) absorbs a new element v as
//   m' = max(m, v),  s' = s * exp(m - m') + exp(v - m')
// so the sum never needs a second read of the row. Still one thread per row: still uncoalesced.
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, warp and block reductions

template <typename T>
__device__ void softmax_online(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) return;
    const T* row = x + (size_t)r * n;
    T* out = y + (size_t)r * n;
    float mx = -CUDART_INF_F, s = 0.0f;
    for (int j = 0; j < n; ++j) {  // one pass for max and sum
        float v = load(row + j);
        float nm = fmaxf(mx, v);
        if (nm == -CUDART_INF_F) {  // only -inf so far: nothing to add (avoids (-inf) - (-inf) = NaN)
            if (v != v) s = CUDART_NAN_F;  // but fmaxf drops a NaN: keep it in the sum, a NaN row is NaN (torch)
            continue;
        }
        s = s * expf(mx - nm) + expf(v - nm);  // rescale the old sum to the new max
        mx = nm;
    }
    float inv = 1.0f / s;  // all -inf row: s = 0, mx = -inf -> exp(NaN) * inf = NaN, as torch
    for (int j = 0; j < n; ++j) store(out + j, expf(load(row + j) - mx) * inv);
}

extern "C" __global__ void softmax_online_f32(const float* x, float* y, int m, int n) { softmax_online(x, y, m, n); }
extern "C" __global__ void softmax_online_f16(const __half* x, __half* y, int m, int n) { softmax_online(x, y, m, n); }
extern "C" __global__ void softmax_online_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int m, int n) {
    softmax_online(x, y, m, n);
}
