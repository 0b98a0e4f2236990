// RMSNorm, block per row: y = x * rsqrt(mean(x^2) + eps) * w, the sum of squares in fp32.
// The same skeleton as softmax_vec.cu with one reduction (sum of squares) instead of the (max, sum) pair:
// 16-byte loads (float4 = 4 floats or 8 halves/bf16), the row held in registers (ITEMS vectors per thread),
// warp shuffles then shared memory across warps. Vector path when N % VEC == 0 (every row and w are 16-byte
// aligned); otherwise a scalar path that reads x twice (the second read mostly from L1/L2).
#include "../include/kernel_helpers.cuh"  // load/store, 16-byte vectors, block_sum

constexpr int ITEMS = 8;  // 16-byte vectors per thread kept in registers

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
