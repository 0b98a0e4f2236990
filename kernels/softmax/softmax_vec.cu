// Block per row with 16-byte loads: one float4 load moves 4 floats or 8 halves/bf16 (LDG.128 on the GPU),
// four times the bytes per instruction of a scalar fp32 load. The row is read ONCE: each thread keeps up to
// ITEMS vectors in registers (1024 threads x 8 x 16 B = 128 KB: 32K fp32 or 64K fp16 elements), so the write
// pass needs no second read (2 bytes moved per element-byte: the minimum). Longer rows re-read the rest.
// A row starts on a 16-byte boundary only when N * sizeof(T) % 16 == 0, so each row peels a scalar head up to
// the boundary and a scalar tail after the last whole vector: any N works, including N = 1.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h>

constexpr int ITEMS = 8;  // 16-byte vectors per thread held in registers (8 x 4 = 32 registers)

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// 16 bytes <-> VEC floats. The last argument only selects the element type.
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

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == -CUDART_INF_F) {  // both empty (only -inf seen), or a NaN met only -inf: fmaxf drops the NaN
        if (om != om || os != os) s = CUDART_NAN_F;  // so keep it in the sum: a NaN input makes the row NaN
        return;
    }
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
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

template <typename T>
__device__ __forceinline__ float4 normalise(float4 raw, float m, float inv) {
    constexpr int VEC = 16 / sizeof(T);
    float f[VEC];
    unpack(raw, f, (const T*)nullptr);
#pragma unroll
    for (int k = 0; k < VEC; ++k) f[k] = expf(f[k] - m) * inv;
    return pack(f, (const T*)nullptr);
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, om, os);
    }
}

__device__ void block_merge(float& m, float& s) {
    __shared__ float sm_m[32];
    __shared__ float sm_s[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    warp_merge(m, s);
    if (lane == 0) {
        sm_m[warp] = m;
        sm_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sm_m[lane] : -CUDART_INF_F;
        s = lane < nwarps ? sm_s[lane] : 0.0f;
        warp_merge(m, s);
        if (lane == 0) {
            sm_m[0] = m;
            sm_s[0] = s;
        }
    }
    __syncthreads();
    m = sm_m[0];
    s = sm_s[0];
}

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
