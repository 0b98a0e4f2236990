// Prelude of the workbench CPU engine: makes CUDA C++ device code compile as ordinary C++ (g++/clang++).
//
// Included first in every translation unit the engine builds. Provides the execution-space qualifiers, the
// built-in variables (threadIdx, ...), vector types, __syncthreads/warp collectives (backed by the fiber
// runtime), atomics, the CUDA math API subset, and the glue that exports kernels to Python.
#pragma once
#define WORKBENCH_CPU_ENGINE 1
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#ifndef __CUDACC_RTC__
#define __CUDACC_RTC__ 1
#endif

#include <math.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "wb_abi.h"

// ------------------------------------------------------------------ qualifiers
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __shared__ static thread_local
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __inline_hint__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __cluster_dims__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))
#define WB_ASM(...) (wb_trap("inline PTX (asm) cannot run on the CPU engine", __FILE__, __LINE__))

// ------------------------------------------------------------------ vector types
#define WB_VEC1(T, N, A) \
  struct alignas(A) N##1 { T x; }; \
  static __forceinline__ N##1 make_##N##1(T x) { return N##1{x}; }
#define WB_VEC2(T, N, A) \
  struct alignas(A) N##2 { T x, y; }; \
  static __forceinline__ N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define WB_VEC3(T, N) \
  struct N##3 { T x, y, z; }; \
  static __forceinline__ N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define WB_VEC4(T, N, A) \
  struct alignas(A) N##4 { T x, y, z, w; }; \
  static __forceinline__ N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define WB_VECS(T, N, A1, A2, A4) WB_VEC1(T, N, A1) WB_VEC2(T, N, A2) WB_VEC3(T, N) WB_VEC4(T, N, A4)
WB_VECS(signed char, char, 1, 2, 4)
WB_VECS(unsigned char, uchar, 1, 2, 4)
WB_VECS(short, short, 2, 4, 8)
WB_VECS(unsigned short, ushort, 2, 4, 8)
WB_VECS(int, int, 4, 8, 16)
WB_VEC1(unsigned int, uint, 4)
WB_VEC2(unsigned int, uint, 8)
WB_VEC4(unsigned int, uint, 16)
WB_VECS(long, long, 8, 16, 16)
WB_VECS(unsigned long, ulong, 8, 16, 16)
WB_VECS(long long, longlong, 8, 16, 16)
WB_VECS(unsigned long long, ulonglong, 8, 16, 16)
WB_VECS(float, float, 4, 8, 16)
WB_VECS(double, double, 8, 16, 16)
typedef wb_uint3 uint3;
static __forceinline__ uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ------------------------------------------------------------------ built-in variables
#define threadIdx (static_cast<const wb_thread*>(wb_self())->threadIdx)
#define blockIdx (static_cast<const wb_thread*>(wb_self())->blockIdx)
#define blockDim (static_cast<const wb_thread*>(wb_self())->blockDim)
#define gridDim (static_cast<const wb_thread*>(wb_self())->gridDim)
static constexpr int warpSize = 32;

// ------------------------------------------------------------------ synchronisation
static __forceinline__ void __syncthreads() { wb_syncthreads(); }
static __forceinline__ int __syncthreads_count(int p) { return wb_syncthreads_op(p, 0); }
static __forceinline__ int __syncthreads_and(int p) { return wb_syncthreads_op(p, 1); }
static __forceinline__ int __syncthreads_or(int p) { return wb_syncthreads_op(p, 2); }
static __forceinline__ void __syncwarp(unsigned mask = 0xffffffffu) { wb_syncwarp(mask); }
static __forceinline__ void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __forceinline__ void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __forceinline__ void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __forceinline__ unsigned __activemask() { return 0xffffffffu; }
__attribute__((noreturn)) static inline void __trap() { wb_trap("__trap() called", nullptr, 0); }
static inline void __brkpt() {}
static inline void __nanosleep(unsigned) {}
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
static inline unsigned long long __globaltimer() { return (unsigned long long)__builtin_ia32_rdtsc(); }

// ------------------------------------------------------------------ warp collectives
namespace wb {
template <class T>
__forceinline__ uint64_t to_u64(const T& v) {
  static_assert(sizeof(T) <= 8, "warp shuffle of a type larger than 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T>
__forceinline__ T from_u64(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}
template <class T>
__forceinline__ T shfl(unsigned mask, T v, int src) {
  unsigned active;
  const uint64_t* buf = wb_warp_gather(mask, to_u64(v), &active);
  if (src < 0 || src > 31 || !(active >> src & 1u)) return v;
  return from_u64<T>(buf[src]);
}
}  // namespace wb

template <class T>
__forceinline__ T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
  int lane = (int)wb_self()->lane;
  int src = (srcLane & (width - 1)) + (lane & ~(width - 1));
  return wb::shfl(mask, var, src);
}
template <class T>
__forceinline__ T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  int lane = (int)wb_self()->lane;
  int src = (lane & (width - 1)) < (int)delta ? lane : lane - (int)delta;
  return wb::shfl(mask, var, src);
}
template <class T>
__forceinline__ T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  int lane = (int)wb_self()->lane;
  int src = (lane & (width - 1)) + (int)delta >= width ? lane : lane + (int)delta;
  return wb::shfl(mask, var, src);
}
template <class T>
__forceinline__ T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
  int lane = (int)wb_self()->lane;
  int src = lane ^ laneMask;
  if (src >= (lane & ~(width - 1)) + width) src = lane;
  return wb::shfl(mask, var, src);
}
static __forceinline__ unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned active;
  const uint64_t* buf = wb_warp_gather(mask, pred != 0, &active);
  unsigned r = 0;
  for (int l = 0; l < 32; ++l)
    if ((active >> l & 1u) && buf[l]) r |= 1u << l;
  return r & (mask | active);
}
static __forceinline__ int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static __forceinline__ int __all_sync(unsigned mask, int pred) {
  unsigned active;
  const uint64_t* buf = wb_warp_gather(mask, pred != 0, &active);
  for (int l = 0; l < 32; ++l)
    if ((active >> l & 1u) && !buf[l]) return 0;
  return 1;
}
static __forceinline__ unsigned __reduce_add_sync(unsigned mask, unsigned v) {
  unsigned active;
  const uint64_t* buf = wb_warp_gather(mask, v, &active);
  unsigned r = 0;
  for (int l = 0; l < 32; ++l)
    if (active >> l & 1u) r += (unsigned)buf[l];
  return r;
}
static __forceinline__ int __reduce_add_sync(unsigned mask, int v) { return (int)__reduce_add_sync(mask, (unsigned)v); }
#define WB_REDUCE(NAME, T, OP)                                       \
  static __forceinline__ T NAME(unsigned mask, T v) {               \
    unsigned active;                                                 \
    const uint64_t* buf = wb_warp_gather(mask, (uint64_t)v, &active); \
    T r = v;                                                         \
    for (int l = 0; l < 32; ++l)                                     \
      if (active >> l & 1u) {                                        \
        T o = (T)buf[l];                                             \
        r = OP;                                                      \
      }                                                              \
    return r;                                                        \
  }
WB_REDUCE(__reduce_min_sync, unsigned, (o < r ? o : r))
WB_REDUCE(__reduce_max_sync, unsigned, (o > r ? o : r))
WB_REDUCE(__reduce_min_sync, int, (o < r ? o : r))
WB_REDUCE(__reduce_max_sync, int, (o > r ? o : r))
WB_REDUCE(__reduce_and_sync, unsigned, (r & o))
WB_REDUCE(__reduce_or_sync, unsigned, (r | o))
WB_REDUCE(__reduce_xor_sync, unsigned, (l == (int)wb_self()->lane ? r : r ^ o))
template <class T>
__forceinline__ unsigned __match_any_sync(unsigned mask, T v) {
  unsigned active;
  uint64_t mine = wb::to_u64(v);
  const uint64_t* buf = wb_warp_gather(mask, mine, &active);
  unsigned r = 0;
  for (int l = 0; l < 32; ++l)
    if ((active >> l & 1u) && buf[l] == mine) r |= 1u << l;
  return r;
}
template <class T>
__forceinline__ unsigned __match_all_sync(unsigned mask, T v, int* pred) {
  unsigned active;
  uint64_t mine = wb::to_u64(v);
  const uint64_t* buf = wb_warp_gather(mask, mine, &active);
  for (int l = 0; l < 32; ++l)
    if ((active >> l & 1u) && buf[l] != mine) {
      *pred = 0;
      return 0;
    }
  *pred = 1;
  return active;
}

// ------------------------------------------------------------------ integer / bit intrinsics
static __forceinline__ int __popc(unsigned x) { return __builtin_popcount(x); }
static __forceinline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static __forceinline__ int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static __forceinline__ int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static __forceinline__ int __ffs(int x) { return __builtin_ffs(x); }
static __forceinline__ int __ffsll(long long x) { return __builtin_ffsll(x); }
static __forceinline__ unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
static __forceinline__ unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static __forceinline__ unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  uint64_t v = ((uint64_t)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static __forceinline__ int __mul24(int a, int b) { return (int)((a << 8 >> 8) * (b << 8 >> 8)); }
static __forceinline__ unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffff) * (b & 0xffffff); }
static __forceinline__ int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static __forceinline__ unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static __forceinline__ long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static __forceinline__ unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static __forceinline__ unsigned __sad(int a, int b, unsigned c) { return (unsigned)(a > b ? a - b : b - a) + c; }
static __forceinline__ unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }
static __forceinline__ int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static __forceinline__ int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static __forceinline__ unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((uint64_t)hi << 32 | lo) << (s & 31)) >> 32);
}
static __forceinline__ unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)(((uint64_t)hi << 32 | lo) >> (s & 31));
}

// ------------------------------------------------------------------ reinterpretation / conversion intrinsics
static __forceinline__ float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static __forceinline__ int __float_as_int(float f) { int x; std::memcpy(&x, &f, 4); return x; }
static __forceinline__ float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static __forceinline__ unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
static __forceinline__ double __longlong_as_double(long long x) { double f; std::memcpy(&f, &x, 8); return f; }
static __forceinline__ long long __double_as_longlong(double f) { long long x; std::memcpy(&x, &f, 8); return x; }
static __forceinline__ int __float2int_rn(float f) { return (int)nearbyintf(f); }
static __forceinline__ int __float2int_rz(float f) { return (int)f; }
static __forceinline__ int __float2int_rd(float f) { return (int)floorf(f); }
static __forceinline__ int __float2int_ru(float f) { return (int)ceilf(f); }
static __forceinline__ unsigned __float2uint_rn(float f) { return (unsigned)nearbyintf(f); }
static __forceinline__ unsigned __float2uint_rz(float f) { return (unsigned)f; }
static __forceinline__ long long __float2ll_rn(float f) { return (long long)nearbyintf(f); }
static __forceinline__ long long __float2ll_rz(float f) { return (long long)f; }
static __forceinline__ float __int2float_rn(int i) { return (float)i; }
static __forceinline__ float __uint2float_rn(unsigned i) { return (float)i; }
static __forceinline__ float __ll2float_rn(long long i) { return (float)i; }
static __forceinline__ float __double2float_rn(double d) { return (float)d; }
static __forceinline__ int __double2int_rn(double d) { return (int)nearbyint(d); }
static __forceinline__ int __double2int_rz(double d) { return (int)d; }

// ------------------------------------------------------------------ math (CUDA math API subset)
template <class A, class B>
__forceinline__ typename std::common_type<A, B>::type min(A a, B b) {
  typedef typename std::common_type<A, B>::type R;
  return (R)b < (R)a ? (R)b : (R)a;
}
template <class A, class B>
__forceinline__ typename std::common_type<A, B>::type max(A a, B b) {
  typedef typename std::common_type<A, B>::type R;
  return (R)a < (R)b ? (R)b : (R)a;
}
// glibc's <math.h> declares (but does not export) __expf & co., so the fast intrinsics are macros here.
#define __expf(x) ::expf(x)
#define __exp10f(x) ::exp10f(x)
#define __logf(x) ::logf(x)
#define __log2f(x) ::log2f(x)
#define __log10f(x) ::log10f(x)
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanf(x) ::tanf(x)
#define __sincosf(x, s, c) ::sincosf(x, s, c)
#define __powf(x, y) ::powf(x, y)
static __forceinline__ float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static __forceinline__ double rsqrt(double x) { return 1.0 / sqrt(x); }
static __forceinline__ float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static __forceinline__ float __fdividef(float x, float y) { return x / y; }
static __forceinline__ float fdividef(float x, float y) { return x / y; }
static __forceinline__ float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static __forceinline__ float __fadd_rn(float a, float b) { return a + b; }
static __forceinline__ float __fsub_rn(float a, float b) { return a - b; }
static __forceinline__ float __fmul_rn(float a, float b) { return a * b; }
static __forceinline__ float __fdiv_rn(float a, float b) { return a / b; }
static __forceinline__ float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static __forceinline__ float __fmaf_rz(float a, float b, float c) { return fmaf(a, b, c); }
static __forceinline__ float __fmaf_ru(float a, float b, float c) { return fmaf(a, b, c); }
static __forceinline__ float __fmaf_rd(float a, float b, float c) { return fmaf(a, b, c); }
static __forceinline__ float __frcp_rn(float a) { return 1.0f / a; }
static __forceinline__ float __fsqrt_rn(float a) { return sqrtf(a); }
static __forceinline__ float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
static __forceinline__ double __dadd_rn(double a, double b) { return a + b; }
static __forceinline__ double __dmul_rn(double a, double b) { return a * b; }
static __forceinline__ double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static __forceinline__ float sinpif(float x) { return sinf((float)M_PI * x); }
static __forceinline__ float cospif(float x) { return cosf((float)M_PI * x); }
static __forceinline__ void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static __forceinline__ float normcdff(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }
static __forceinline__ double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }

// ------------------------------------------------------------------ memory access intrinsics
template <class T> __forceinline__ T __ldg(const T* p) { return *p; }
template <class T> __forceinline__ T __ldcg(const T* p) { return *p; }
template <class T> __forceinline__ T __ldca(const T* p) { return *p; }
template <class T> __forceinline__ T __ldcs(const T* p) { return *p; }
template <class T> __forceinline__ T __ldlu(const T* p) { return *p; }
template <class T> __forceinline__ T __ldcv(const T* p) { return *p; }
template <class T> __forceinline__ void __stcg(T* p, T v) { *p = v; }
template <class T> __forceinline__ void __stcs(T* p, T v) { *p = v; }
template <class T> __forceinline__ void __stwb(T* p, T v) { *p = v; }
template <class T> __forceinline__ void __stwt(T* p, T v) { *p = v; }
template <class T> __forceinline__ void __prefetch_global_l1(const T*) {}
template <class T> __forceinline__ void __prefetch_global_l2(const T*) {}
static __forceinline__ unsigned __cvta_generic_to_shared(const void* p) { return (unsigned)(uintptr_t)p; }
static __forceinline__ bool __isShared(const void*) { return false; }
static __forceinline__ bool __isGlobal(const void*) { return true; }

// ------------------------------------------------------------------ atomics (relaxed, like CUDA's)
namespace wb {
template <class T, class F>
__forceinline__ T atomic_cas_loop(T* p, F f) {
  typedef typename std::conditional<sizeof(T) == 2, uint16_t,
          typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type U;
  static_assert(sizeof(T) == sizeof(U), "atomic on an unsupported type size");
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, __ATOMIC_RELAXED);
  for (;;) {
    T ov;
    std::memcpy(&ov, &old, sizeof(T));
    T nv = f(ov);
    U nu;
    std::memcpy(&nu, &nv, sizeof(T));
    if (__atomic_compare_exchange_n(q, &old, nu, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return ov;
  }
}
}  // namespace wb

#define WB_ATOMIC_INT(T)                                                                                      \
  static __forceinline__ T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }         \
  static __forceinline__ T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }         \
  static __forceinline__ T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }       \
  static __forceinline__ T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }         \
  static __forceinline__ T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }           \
  static __forceinline__ T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }         \
  static __forceinline__ T atomicMax(T* p, T v) {                                                              \
    return wb::atomic_cas_loop(p, [v](T o) { return o < v ? v : o; });                                         \
  }                                                                                                            \
  static __forceinline__ T atomicMin(T* p, T v) {                                                              \
    return wb::atomic_cas_loop(p, [v](T o) { return v < o ? v : o; });                                         \
  }                                                                                                            \
  static __forceinline__ T atomicCAS(T* p, T cmp, T v) {                                                       \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                        \
    return cmp;                                                                                                \
  }
WB_ATOMIC_INT(int)
WB_ATOMIC_INT(unsigned int)
WB_ATOMIC_INT(long long)
WB_ATOMIC_INT(unsigned long long)
static __forceinline__ unsigned short atomicCAS(unsigned short* p, unsigned short cmp, unsigned short v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return cmp;
}
static __forceinline__ unsigned atomicInc(unsigned* p, unsigned lim) {
  return wb::atomic_cas_loop(p, [lim](unsigned o) { return o >= lim ? 0u : o + 1; });
}
static __forceinline__ unsigned atomicDec(unsigned* p, unsigned lim) {
  return wb::atomic_cas_loop(p, [lim](unsigned o) { return (o == 0 || o > lim) ? lim : o - 1; });
}
#define WB_ATOMIC_FLOAT(T)                                                                                    \
  static __forceinline__ T atomicAdd(T* p, T v) { return wb::atomic_cas_loop(p, [v](T o) { return o + v; }); } \
  static __forceinline__ T atomicSub(T* p, T v) { return wb::atomic_cas_loop(p, [v](T o) { return o - v; }); } \
  static __forceinline__ T atomicMax(T* p, T v) {                                                              \
    return wb::atomic_cas_loop(p, [v](T o) { return o < v ? v : o; });                                         \
  }                                                                                                            \
  static __forceinline__ T atomicMin(T* p, T v) {                                                              \
    return wb::atomic_cas_loop(p, [v](T o) { return v < o ? v : o; });                                         \
  }                                                                                                            \
  static __forceinline__ T atomicExch(T* p, T v) { return wb::atomic_cas_loop(p, [v](T) { return v; }); }
WB_ATOMIC_FLOAT(float)
WB_ATOMIC_FLOAT(double)
#define WB_ATOMIC_SCOPES(NAME)                                                           \
  template <class P, class... A> __forceinline__ auto NAME##_block(P p, A... a) {        \
    return NAME(p, a...);                                                                \
  }                                                                                      \
  template <class P, class... A> __forceinline__ auto NAME##_system(P p, A... a) {       \
    return NAME(p, a...);                                                                \
  }
WB_ATOMIC_SCOPES(atomicAdd)
WB_ATOMIC_SCOPES(atomicSub)
WB_ATOMIC_SCOPES(atomicExch)
WB_ATOMIC_SCOPES(atomicMax)
WB_ATOMIC_SCOPES(atomicMin)
WB_ATOMIC_SCOPES(atomicCAS)
WB_ATOMIC_SCOPES(atomicAnd)
WB_ATOMIC_SCOPES(atomicOr)
WB_ATOMIC_SCOPES(atomicXor)

// ------------------------------------------------------------------ kernel export glue
namespace wb {
template <class T, class = void>
struct tcode_ext {  // specialised by cuda_fp16.h / cuda_bf16.h
  static constexpr const char* value = nullptr;
};
template <class T>
struct gptr;
struct ptr_arg {
  void* ptr;
  uint64_t bytes;
};
template <class T>
struct is_gptr : std::false_type {};
template <class T>
struct is_gptr<gptr<T>> : std::true_type {};

struct sigbuf {
  char s[1024];
  int n = 0;
  void put(const char* t) {
    while (*t && n < 1000) s[n++] = *t++;
    s[n] = 0;
  }
  void put_num(unsigned long v) {
    char t[24];
    snprintf(t, sizeof t, "%lu", v);
    put(t);
  }
};

template <class T>
void put_scalar(sigbuf& b) {
  typedef typename std::remove_cv<T>::type U;
  if (tcode_ext<U>::value) {
    b.put(tcode_ext<U>::value);
  } else if (std::is_same<U, bool>::value) {
    b.put("b");
  } else if (std::is_floating_point<U>::value) {
    b.put(sizeof(U) == 4 ? "f32" : (sizeof(U) == 8 ? "f64" : "f128"));
  } else if (std::is_integral<U>::value) {
    b.put(std::is_signed<U>::value ? "i" : "u");
    b.put_num(sizeof(U) * 8);
  } else if (std::is_void<U>::value) {
    b.put("v");
  } else if (std::is_pointer<U>::value) {
    b.put("p");
  } else {
    b.put("s");
    b.put_num(sizeof(typename std::conditional<std::is_void<U>::value, char, U>::type));
  }
}
template <class T>
void put_code(sigbuf& b) {
  typedef typename std::remove_cv<T>::type U;
  if constexpr (std::is_pointer<U>::value) {
    typedef typename std::remove_pointer<U>::type E;
    b.put(std::is_const<E>::value ? "*c" : "*");
    put_scalar<E>(b);
  } else if constexpr (is_gptr<U>::value) {
    typedef typename U::element_type E;
    b.put(std::is_const<E>::value ? "*c" : "*");
    put_scalar<E>(b);
  } else {
    put_scalar<U>(b);
  }
}
template <class... P>
const char* signature(void (*)(P...)) {
  static sigbuf b;
  if (b.n == 0) {
    b.put("(");
    int i = 0;
    ((b.put(i++ ? "," : ""), put_code<P>(b)), ...);
    b.put(")");
  }
  return b.s;
}
template <class P>
__forceinline__ P arg_cast(void* a, int index) {
  typedef typename std::remove_cv<P>::type U;
  if constexpr (std::is_pointer<U>::value) {
    return (P)(static_cast<ptr_arg*>(a)->ptr);
  } else if constexpr (is_gptr<U>::value) {
    ptr_arg* r = static_cast<ptr_arg*>(a);
    return U((typename U::element_type*)r->ptr, (const char*)r->ptr, r->bytes, index);
  } else {
    U v;
    std::memcpy((void*)&v, a, sizeof(U));
    return v;
  }
}
template <class... P, size_t... I>
__forceinline__ void call(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(arg_cast<P>(a[I], (int)I)...);
}
template <class... P>
constexpr size_t arity(void (*)(P...)) {
  return sizeof...(P);
}
template <auto F>
void invoke(void** a) {
  call(F, a, std::make_index_sequence<arity(F)>());
}
struct kernel_entry {
  const char* name;
  const char* (*sig)();
  void (*invoke)(void**);
};
template <auto F>
const char* sig_of() {
  return signature(F);
}
}  // namespace wb

#define WB_KERNEL(NAME_STR, ...) {NAME_STR, &wb::sig_of<&__VA_ARGS__>, &wb::invoke<&__VA_ARGS__>},

#ifdef WB_CHECKED
#include "wb_checked.h"
#endif
