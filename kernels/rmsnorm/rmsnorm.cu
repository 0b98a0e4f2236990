// RMSNorm, block per row: y = x * rsqrt(mean(x^2) + eps) * w, the sum of squares in fp32.
// The same skeleton as softmax_vec.cu with one reduction (sum of squares) instead of the (max, sum) pair:
// 16-byte loads (float4 = 4 floats or 8 halves/bf16), the row held in registers (ITEMS vectors per thread),
// warp shuffles then shared memory across warps. Vector path when N % VEC == 0 (every row and w are 16-byte
// aligned); otherwise a scalar path that reads x twice (the second read mostly from L1/L2).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

constexpr int ITEMS = 8;  // 16-byte vectors per thread kept in registers

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

__device__ __forceinline__ void unpack(float4 r, float* f, const float*) {
    f[0] = r.x; f[1] = r.y; f[2] = r.z; f[3] = r.w;
}
__device__ __forceinline__ void unpack(float4 r, float* f, const __half*) {
    const __half2* h = reinterpret_cast<const __half2*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 t = __half22float2(h[k]);
        f[2 * k] = t.x; f[2 * k + 1] = t.y;
    }
}
__device__ __forceinline__ void unpack(float4 r, float* f, const __nv_bfloat16*) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 t = __bfloat1622float2(h[k]);
        f[2 * k] = t.x; f[2 * k + 1] = t.y;
    }
}
__device__ __forceinline__ float4 pack(const float* f, const float*) { return make_float4(f[0], f[1], f[2], f[3]); }
__device__ __forceinline__ float4 pack(const float* f, const __half*) {
    float4 r;
    __half2* h = reinterpret_cast<__half2*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
    return r;
}
__device__ __forceinline__ float4 pack(const float* f, const __nv_bfloat16*) {
    float4 r;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    return r;
}

// Every thread gets the block's sum. blockDim.x must be a multiple of 32.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? part[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) part[0] = v;
    }
    __syncthreads();
    return part[0];
}

template <typename T>
__device__ void rmsnorm(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int n, float eps) {
    constexpr int VEC = 16 / sizeof(T);
    const T* row = x + (size_t)blockIdx.x * n;
    T* out = y + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    if (n % VEC == 0) {  // every row starts on a 16-byte boundary (the host passes aligned buffers)
        int nvec = n / VEC;
        const float4* vin = reinterpret_cast<const float4*>(row);
        const float4* vw = reinterpret_cast<const float4*>(w);
        float4* vout = reinterpret_cast<float4*>(out);
        float4 cache[ITEMS];
        float f[VEC], g[VEC];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            int i = threadIdx.x + k * blockDim.x;
            if (i < nvec) {
                cache[k] = vin[i];
                unpack(cache[k], f, (const T*)nullptr);
#pragma unroll
                for (int e = 0; e < VEC; ++e) ss += f[e] * f[e];
            }
        }
        for (int i = threadIdx.x + ITEMS * blockDim.x; i < nvec; i += blockDim.x) {
            unpack(vin[i], f, (const T*)nullptr);
#pragma unroll
            for (int e = 0; e < VEC; ++e) ss += f[e] * f[e];
        }
        float rstd = rsqrtf(block_sum(ss) / n + eps);
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            int i = threadIdx.x + k * blockDim.x;
            if (i < nvec) {
                unpack(cache[k], f, (const T*)nullptr);
                unpack(vw[i], g, (const T*)nullptr);
#pragma unroll
                for (int e = 0; e < VEC; ++e) f[e] = f[e] * rstd * g[e];
                vout[i] = pack(f, (const T*)nullptr);
            }
        }
        for (int i = threadIdx.x + ITEMS * blockDim.x; i < nvec; i += blockDim.x) {
            unpack(vin[i], f, (const T*)nullptr);
            unpack(vw[i], g, (const T*)nullptr);
#pragma unroll
            for (int e = 0; e < VEC; ++e) f[e] = f[e] * rstd * g[e];
            vout[i] = pack(f, (const T*)nullptr);
        }
    } else {  // ragged N: scalar, coalesced
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            float v = load(row + j);
            ss += v * v;
        }
        float rstd = rsqrtf(block_sum(ss) / n + eps);
        for (int j = threadIdx.x; j < n; j += blockDim.x) store(out + j, load(row + j) * rstd * load(w + j));
    }
}

extern "C" __global__ void rmsnorm_f32(const float* x, const float* w, float* y, int n, float eps) {
    rmsnorm(x, w, y, n, eps);
}
extern "C" __global__ void rmsnorm_f16(const __half* x, const __half* w, __half* y, int n, float eps) {
    rmsnorm(x, w, y, n, eps);
}
extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int n,
                                        float eps) {
    rmsnorm(x, w, y, n, eps);
}
