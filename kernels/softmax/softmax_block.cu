// Block per row, for long rows: up to 1024 threads share one row. Each thread keeps an online (m, s) over the
// elements tid, tid + blockDim, ... (coalesced); a warp merges its 32 pairs with shuffles, warp leaders put
// one pair each in shared memory, warp 0 merges those, and every thread reads the row's (max, sum) back.
// Two __syncthreads: after the leaders write, and after warp 0 publishes. Then a write pass (re-reads the row:
// 2 reads + 1 write; for rows of <= 64K fp32 the second read mostly hits L2).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h>

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == -CUDART_INF_F) {  // both empty (only -inf seen), or a NaN met only -inf: fmaxf drops the NaN
        if (om != om || os != os) s = CUDART_NAN_F;  // so keep it in the sum: a NaN input makes the row NaN
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

// Every thread of the block ends with the block's merged (m, s). blockDim.x must be a multiple of 32.
__device__ void block_merge(float& m, float& s) {
    __shared__ float sm_m[32];  // one slot per warp (1024 threads = 32 warps)
    __shared__ float sm_s[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    warp_merge(m, s);
    if (lane == 0) {
        sm_m[warp] = m;
        sm_s[warp] = s;
    }
    __syncthreads();  // every leader has written before warp 0 reads
    if (warp == 0) {
        m = lane < nwarps ? sm_m[lane] : -CUDART_INF_F;
        s = lane < nwarps ? sm_s[lane] : 0.0f;
        warp_merge(m, s);
        if (lane == 0) {
            sm_m[0] = m;
            sm_s[0] = s;
        }
    }
    __syncthreads();  // warp 0 has published before anyone reads slot 0
    m = sm_m[0];
    s = sm_s[0];
}

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
