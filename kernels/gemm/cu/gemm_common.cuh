// Shared helpers for the CUDA C gemm kernels: guarded 4-wide loads/stores, and a macro that exports one kernel body
// as <name>_f32 / <name>_f16 / <name>_bf16 (fp32 accumulation in every case). Dtype conversions (to_f32, from_f32)
// come from the kernels' shared header.
#pragma once
#include "../../include/kernel_helpers.cuh"

// Four consecutive elements in one instruction: LDG.128 for fp32 (float4), LDG.64 for 16-bit types (uint2).
template <typename T> struct Vec4;
template <> struct Vec4<float> { typedef float4 type; };
template <> struct Vec4<__half> { typedef uint2 type; };
template <> struct Vec4<__nv_bfloat16> { typedef uint2 type; };

// Load p[0..3] as floats. `valid` (0..4) elements are in range, the rest read as 0; `vec` says the row is
// 16-byte (fp32) / 8-byte (16-bit) aligned at p, so a full chunk can be one vector load.
template <typename T>
__device__ __forceinline__ float4 load4(const T* p, int valid, bool vec) {
  if (vec && valid == 4) {
    typename Vec4<T>::type v = *reinterpret_cast<const typename Vec4<T>::type*>(p);
    const T* e = reinterpret_cast<const T*>(&v);
    return make_float4(to_f32(e[0]), to_f32(e[1]), to_f32(e[2]), to_f32(e[3]));
  }
  float r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = i < valid ? to_f32(p[i]) : 0.0f;
  return make_float4(r[0], r[1], r[2], r[3]);
}

// Store the first `valid` of v.x..v.w to p, as one vector store when the chunk is full and aligned. Taking v by
// value (not a pointer into the accumulator array) keeps the accumulators in registers, not local memory.
template <typename T>
__device__ __forceinline__ void store4(T* p, float4 v4, int valid, bool vec) {
  const float r[4] = {v4.x, v4.y, v4.z, v4.w};
  if (vec && valid == 4) {
    typename Vec4<T>::type v;
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) e[i] = from_f32<T>(r[i]);
    *reinterpret_cast<typename Vec4<T>::type*>(p) = v;
    return;
  }
  for (int i = 0; i < valid; ++i) p[i] = from_f32<T>(r[i]);
}

// One 128-bit shared-memory load (LDS.128) into r[off..off+3] of a register array (a macro so r stays in registers).
#define LDS128(r, off, src)                                                                                       \
  do {                                                                                                            \
    const float4 t_ = *reinterpret_cast<const float4*>(src);                                                      \
    (r)[(off)] = t_.x, (r)[(off) + 1] = t_.y, (r)[(off) + 2] = t_.z, (r)[(off) + 3] = t_.w;                       \
  } while (0)

// Four accumulators acc[i][j..j+3] as a float4 for store4.
#define ACC4(acc, i, j) make_float4((acc)[i][j], (acc)[i][(j) + 1], (acc)[i][(j) + 2], (acc)[i][(j) + 3])

__device__ __forceinline__ int clamp4(int n) { return n < 0 ? 0 : (n > 4 ? 4 : n); }

// Export body<T>(a, b, c, M, N, K, vec) as extern "C" name_<f32|f16|bf16> with the given launch bound (threads per
// block). -DWB_ONLY_DT=1 exports only <name>_f32 (a third of the compile time, for workbench.inspect).
#define GEMM_EXPORT_ONE(SUF, T, name, body, threads)                                                              \
  extern "C" __global__ void __launch_bounds__(threads)                                                           \
      name##_##SUF(const T* a, const T* b, T* c, int M, int N, int K, int vec) {                                  \
    body<T>(a, b, c, M, N, K, vec != 0);                                                                          \
  }
#define GEMM_EXPORT(name, body, threads) WB_EACH_DTYPE(GEMM_EXPORT_ONE, name, body, threads)
