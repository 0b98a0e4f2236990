// Device helpers every op's .cu file shares: dtype conversions, 16-byte vectors, warp and block reductions, and
// which dtype instances a file exports. Include it by its relative path (#include "../include/kernel_helpers.cuh"):
// every build resolves that through the folder of the .cu (cupy/NVRTC and the CPU engine pass -I<that folder>,
// nvcc looks beside the including file), so nothing that compiles a .cu needs another include path.
// No libc headers: NVRTC, which cupy compiles with on a GPU, has none.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

// ---- Scalars. Kernels compute in fp32 and store in the element type T (float, __half or __nv_bfloat16).
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <typename T> __device__ __forceinline__ float load(const T* p) { return to_f32(*p); }
template <typename T> __device__ __forceinline__ void store(T* p, float v) { *p = from_f32<T>(v); }

// ---- 16-byte vectors: one float4 moves 4 floats or 8 halves/bf16 (LDG.128 / STG.128 on the GPU).
// unpack/pack convert 16 bytes <-> 16 / sizeof(T) floats; the last argument only selects T: (const T*)nullptr.
// A 16-bit T travels as 4 pairs (__half2 / __nv_bfloat162), each converted with one paired instruction.
__device__ __forceinline__ float2 pair_to_f32(__half2 h) { return __half22float2(h); }
__device__ __forceinline__ float2 pair_to_f32(__nv_bfloat162 h) { return __bfloat1622float2(h); }
__device__ __forceinline__ void pair_from_f32(__half2* h, float a, float b) { *h = __floats2half2_rn(a, b); }
__device__ __forceinline__ void pair_from_f32(__nv_bfloat162* h, float a, float b) { *h = __floats2bfloat162_rn(a, b); }
template <typename T2> __device__ __forceinline__ void unpack_pairs(float4 r, float* f) {
    const T2* h = reinterpret_cast<const T2*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 t = pair_to_f32(h[k]);
        f[2 * k] = t.x; f[2 * k + 1] = t.y;
    }
}
template <typename T2> __device__ __forceinline__ float4 pack_pairs(const float* f) {
    float4 r;
    T2* h = reinterpret_cast<T2*>(&r);
#pragma unroll
    for (int k = 0; k < 4; ++k) pair_from_f32(&h[k], f[2 * k], f[2 * k + 1]);
    return r;
}
__device__ __forceinline__ void unpack(float4 r, float* f, const float*) {
    f[0] = r.x; f[1] = r.y; f[2] = r.z; f[3] = r.w;
}
__device__ __forceinline__ void unpack(float4 r, float* f, const __half*) { unpack_pairs<__half2>(r, f); }
__device__ __forceinline__ void unpack(float4 r, float* f, const __nv_bfloat16*) { unpack_pairs<__nv_bfloat162>(r, f); }
__device__ __forceinline__ float4 pack(const float* f, const float*) { return make_float4(f[0], f[1], f[2], f[3]); }
__device__ __forceinline__ float4 pack(const float* f, const __half*) { return pack_pairs<__half2>(f); }
__device__ __forceinline__ float4 pack(const float* f, const __nv_bfloat16*) { return pack_pairs<__nv_bfloat162>(f); }

// ---- Warp reductions: five butterfly steps (__shfl_xor_sync 16, 8, 4, 2, 1 lanes apart), no shared memory.
// The whole warp must take part; afterwards every lane holds the result (the same bits in every lane).
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Every thread gets the block's sum: warp shuffles, one slot per warp in shared memory, warp 0 merges the slots.
// blockDim.x must be a multiple of 32. (inline: a file that never calls it emits neither it nor its shared slots.)
inline __device__ float block_sum(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) part[0] = v;
    }
    __syncthreads();
    return part[0];
}

// ---- Online softmax: a partial row as (m, s) = (max so far, sum of exp(x - m) so far).
// Merge another partial (om, os) into (m, s): both sums are rescaled to the larger max. A single element v is the
// partial (v, 1).
__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == -CUDART_INF_F) {  // both empty (only -inf seen), or a NaN met only -inf: fmaxf drops the NaN
        if (om != om || os != os) s = CUDART_NAN_F;  // so keep it in the sum: a NaN input makes the row NaN
        return;
    }
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
}

// Merge the 32 lanes' partials with butterfly shuffles: after 5 steps every lane holds the warp's (m, s).
__device__ __forceinline__ void warp_merge(float& m, float& s) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, om, os);
    }
}

// Every thread of the block ends with the block's merged (m, s). blockDim.x must be a multiple of 32.
// Two __syncthreads: after the warp leaders write their slots, and after warp 0 publishes the merge.
inline __device__ void block_merge(float& m, float& s) {
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
        m = lane < nwarps ? sm_m[lane] : -CUDART_INF_F;  // slots past the last warp were never written
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

// Absorb one 16-byte vector into (m, s): one rescale per vector, not per element.
template <typename T>
__device__ __forceinline__ void absorb(float& m, float& s, float4 raw) {
    constexpr int VEC = 16 / sizeof(T);
    float f[VEC];
    unpack(raw, f, (const T*)nullptr);
    float vm = f[0];
#pragma unroll
    for (int k = 1; k < VEC; ++k) vm = fmaxf(vm, f[k]);
    float nm = fmaxf(m, vm);
    if (nm == -CUDART_INF_F) {  // only -inf so far; a NaN among them (fmaxf drops it) makes the row NaN
#pragma unroll
        for (int k = 0; k < VEC; ++k) if (f[k] != f[k]) s = CUDART_NAN_F;
        return;
    }
    float add = 0.0f;
#pragma unroll
    for (int k = 0; k < VEC; ++k) add += expf(f[k] - nm);
    s = s * expf(m - nm) + add;
    m = nm;
}

// exp(x - m) * inv for one 16-byte vector (the write pass of a row kept in registers).
template <typename T>
__device__ __forceinline__ float4 normalise(float4 raw, float m, float inv) {
    constexpr int VEC = 16 / sizeof(T);
    float f[VEC];
    unpack(raw, f, (const T*)nullptr);
#pragma unroll
    for (int k = 0; k < VEC; ++k) f[k] = expf(f[k] - m) * inv;
    return pack(f, (const T*)nullptr);
}

// ---- Which instances a file exports. A kernel body templated on T is exported as extern "C" kernels, one per
// dtype: WB_EACH_DTYPE(X, arg) expands X(f32, float, arg) X(f16, __half, arg) X(bf16, __nv_bfloat16, arg), and
// WB_EACH_HALF(X, arg) the two 16-bit ones (tensor-core kernels). -DWB_ONLY_DT=<1 f32 | 2 f16 | 3 bf16> keeps one
// dtype: a GPU launch compiles only the kernel it runs, wb.inspect only the one it reads; without it (the CPU
// engine) the file exports them all. WB_WANT(SEL, V) is true when SEL is 0 (every instance) or V.
// WB_EACH_HEAD_DIM(EACH, X) does the same over attention's compiled head dims (EACH(X, 16) ... EACH(X, 128)), or
// only -DWB_ONLY_HD=<HD>'s: WB_EACH_HEAD_DIM(WB_EACH_DTYPE, X) exports every (head dim, dtype) pair.
#ifndef WB_ONLY_DT
#define WB_ONLY_DT 0
#endif
#define WB_WANT(SEL, V) ((SEL) == 0 || (SEL) == (V))
#if WB_WANT(WB_ONLY_DT, 1)
#define WB_F32(X, ...) X(f32, float, __VA_ARGS__)
#else
#define WB_F32(X, ...)
#endif
#if WB_WANT(WB_ONLY_DT, 2)
#define WB_F16(X, ...) X(f16, __half, __VA_ARGS__)
#else
#define WB_F16(X, ...)
#endif
#if WB_WANT(WB_ONLY_DT, 3)
#define WB_BF16(X, ...) X(bf16, __nv_bfloat16, __VA_ARGS__)
#else
#define WB_BF16(X, ...)
#endif
#define WB_EACH_DTYPE(X, ...) WB_F32(X, __VA_ARGS__) WB_F16(X, __VA_ARGS__) WB_BF16(X, __VA_ARGS__)
#define WB_EACH_HALF(X, ...) WB_F16(X, __VA_ARGS__) WB_BF16(X, __VA_ARGS__)
#ifndef WB_ONLY_HD
#define WB_ONLY_HD 0
#endif
#if WB_WANT(WB_ONLY_HD, 16)
#define WB_HD16(EACH, X) EACH(X, 16)
#else
#define WB_HD16(EACH, X)
#endif
#if WB_WANT(WB_ONLY_HD, 32)
#define WB_HD32(EACH, X) EACH(X, 32)
#else
#define WB_HD32(EACH, X)
#endif
#if WB_WANT(WB_ONLY_HD, 64)
#define WB_HD64(EACH, X) EACH(X, 64)
#else
#define WB_HD64(EACH, X)
#endif
#if WB_WANT(WB_ONLY_HD, 128)
#define WB_HD128(EACH, X) EACH(X, 128)
#else
#define WB_HD128(EACH, X)
#endif
#define WB_EACH_HEAD_DIM(EACH, X) WB_HD16(EACH, X) WB_HD32(EACH, X) WB_HD64(EACH, X) WB_HD128(EACH, X)
