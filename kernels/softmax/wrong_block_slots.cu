// Known-wrong block softmax (fp32): the cross-warp step reads all 32 per-warp slots of shared memory, but a block
// of 64 threads has only 2 warps, so warp 0 merges 30 slots that no thread ever wrote. On a GPU they hold whatever
// the last kernel left there (often NaN or huge values); compute-sanitizer's initcheck, and the checker, report the
// read of uninitialized shared memory. The fix is softmax_block.cu's `lane < nwarps ? sm_m[lane] : -inf`.
#include <math_constants.h>

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == -CUDART_INF_F) {
        if (om != om || os != os) s = CUDART_NAN_F;
        return;
    }
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, om, os);
    }
}

extern "C" __global__ void softmax_unguarded_slots_f32(const float* x, float* y, int m, int n) {
    __shared__ float sm_m[32];
    __shared__ float sm_s[32];
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float mx = -CUDART_INF_F, s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) merge(mx, s, row[j], 1.0f);
    warp_merge(mx, s);
    if (lane == 0) {
        sm_m[warp] = mx;
        sm_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        mx = sm_m[lane];  // BUG: slots lane >= blockDim.x / 32 were never written
        s = sm_s[lane];
        warp_merge(mx, s);
        if (lane == 0) {
            sm_m[0] = mx;
            sm_s[0] = s;
        }
    }
    __syncthreads();
    mx = sm_m[0];
    s = sm_s[0];
    for (int j = threadIdx.x; j < n; j += blockDim.x) out[j] = expf(row[j] - mx) / s;
}
