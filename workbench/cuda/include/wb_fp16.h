// __half and __nv_bfloat16 for the CPU engine, with the conversions and arithmetic of cuda_fp16.h/cuda_bf16.h.
//
// Storage is the IEEE binary16 / bfloat16 bit pattern. Conversions from float round to nearest even (NaN ->
// canonical 0x7fff, like the GPU). Arithmetic is done in float and rounded once: for + - * / and sqrt this is
// correctly rounded, because float carries more than 2p+2 bits for both formats (no double-rounding error).
#pragma once
#include "wb_cuda.h"

namespace wb {
static __forceinline__ uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static __forceinline__ float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

static inline unsigned short float_to_half_rn(float f) {
  uint32_t x = f2u(f);
  unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fffu;                 // NaN
  if (x >= 0x47800000u) return sign | 0x7c00u;         // >= 65536 (or inf): inf
  uint32_t e = x >> 23;
  if (e >= 113) {                                      // normal half
    uint32_t m = x & 0x7fffffu;
    uint32_t h = ((e - 112) << 10) | (m >> 13);
    uint32_t rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // carries into the exponent / inf correctly
    return (unsigned short)(sign | h);
  }
  if (e < 102) return sign;                            // < 2^-25: rounds to zero
  uint32_t m = (x & 0x7fffffu) | 0x800000u;            // subnormal half: value = m * 2^(e-150) = h * 2^-24
  uint32_t s = 126 - e;                                // shift 14..24
  uint32_t h = m >> s;
  uint32_t rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (h & 1u))) h++;
  return (unsigned short)(sign | h);
}
static inline unsigned short float_to_half_rz(float f) {
  uint32_t x = f2u(f);
  unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fffu;
  if (x == 0x7f800000u) return sign | 0x7c00u;
  if (x >= 0x477ff000u) return sign | 0x7bffu;         // largest finite
  uint32_t e = x >> 23;
  if (e >= 113) return (unsigned short)(sign | ((e - 112) << 10) | ((x & 0x7fffffu) >> 13));
  if (e < 102) return sign;
  return (unsigned short)(sign | ((((x & 0x7fffffu) | 0x800000u)) >> (126 - e)));
}
static inline float half_to_float(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return u2f(sign);
    float v = (float)m * 5.9604644775390625e-08f;     // m * 2^-24
    return sign ? -v : v;
  }
  return u2f(sign | ((e + 112) << 23) | (m << 13));
}
static inline unsigned short float_to_bf16_rn(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
static inline unsigned short float_to_bf16_rz(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return (unsigned short)(x >> 16);
}
static __forceinline__ float bf16_to_float(unsigned short h) { return u2f((uint32_t)h << 16); }
}  // namespace wb

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };

#define WB_HALF_CLASS(T, RAW, TO, FROM)                                                      \
  struct alignas(2) T {                                                                      \
    unsigned short __x;                                                                      \
    T() = default;                                                                           \
    constexpr T(const RAW& r) : __x(r.x) {}                                                  \
    T(float f) : __x(wb::TO(f)) {}                                                           \
    T(double f) : __x(wb::TO((float)f)) {}                                                   \
    T(int v) : __x(wb::TO((float)v)) {}                                                      \
    T(unsigned int v) : __x(wb::TO((float)v)) {}                                             \
    T(short v) : __x(wb::TO((float)v)) {}                                                    \
    T(unsigned short v) : __x(wb::TO((float)v)) {}                                          \
    T(long long v) : __x(wb::TO((float)v)) {}                                                \
    T(unsigned long long v) : __x(wb::TO((float)v)) {}                                       \
    operator float() const { return wb::FROM(__x); }                                        \
    operator RAW() const { return RAW{__x}; }                                                \
    T& operator=(const RAW& r) { __x = r.x; return *this; }                                  \
    T& operator=(float f) { __x = wb::TO(f); return *this; }                                 \
    T& operator=(double f) { __x = wb::TO((float)f); return *this; }                         \
  };

WB_HALF_CLASS(__half, __half_raw, float_to_half_rn, half_to_float)
WB_HALF_CLASS(__nv_bfloat16, __nv_bfloat16_raw, float_to_bf16_rn, bf16_to_float)
#undef WB_HALF_CLASS
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

struct alignas(4) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
};
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;
struct __half2_raw { unsigned short x, y; };
struct __nv_bfloat162_raw { unsigned short x, y; };

namespace wb {
template <> struct tcode_ext<__half> { static constexpr const char* value = "f16"; };
template <> struct tcode_ext<__nv_bfloat16> { static constexpr const char* value = "bf16"; };
template <> struct tcode_ext<__half2> { static constexpr const char* value = "s4"; };
template <> struct tcode_ext<__nv_bfloat162> { static constexpr const char* value = "s4"; };
}  // namespace wb

// ---- conversions
static __forceinline__ __half __float2half(float f) { return __half_raw{wb::float_to_half_rn(f)}; }
static __forceinline__ __half __float2half_rn(float f) { return __half_raw{wb::float_to_half_rn(f)}; }
static __forceinline__ __half __float2half_rz(float f) { return __half_raw{wb::float_to_half_rz(f)}; }
static __forceinline__ __half __double2half(double d) { return __float2half((float)d); }
static __forceinline__ float __half2float(__half h) { return wb::half_to_float(h.__x); }
static __forceinline__ __half __int2half_rn(int i) { return __float2half((float)i); }
static __forceinline__ __half __uint2half_rn(unsigned i) { return __float2half((float)i); }
static __forceinline__ __half __short2half_rn(short i) { return __float2half((float)i); }
static __forceinline__ int __half2int_rz(__half h) { return (int)__half2float(h); }
static __forceinline__ int __half2int_rn(__half h) { return (int)nearbyintf(__half2float(h)); }
static __forceinline__ short __half2short_rz(__half h) { return (short)__half2float(h); }
static __forceinline__ unsigned short __half_as_ushort(__half h) { return h.__x; }
static __forceinline__ short __half_as_short(__half h) { return (short)h.__x; }
static __forceinline__ __half __ushort_as_half(unsigned short u) { return __half_raw{u}; }
static __forceinline__ __half __short_as_half(short u) { return __half_raw{(unsigned short)u}; }

static __forceinline__ __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16_raw{wb::float_to_bf16_rn(f)}; }
static __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16_raw{wb::float_to_bf16_rn(f)}; }
static __forceinline__ __nv_bfloat16 __float2bfloat16_rz(float f) { return __nv_bfloat16_raw{wb::float_to_bf16_rz(f)}; }
static __forceinline__ __nv_bfloat16 __double2bfloat16(double d) { return __float2bfloat16((float)d); }
static __forceinline__ float __bfloat162float(__nv_bfloat16 h) { return wb::bf16_to_float(h.__x); }
static __forceinline__ __nv_bfloat16 __int2bfloat16_rn(int i) { return __float2bfloat16((float)i); }
static __forceinline__ int __bfloat162int_rz(__nv_bfloat16 h) { return (int)__bfloat162float(h); }
static __forceinline__ unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static __forceinline__ short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static __forceinline__ __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16_raw{u}; }
static __forceinline__ __nv_bfloat16 __short_as_bfloat16(short u) { return __nv_bfloat16_raw{(unsigned short)u}; }
static __forceinline__ __nv_bfloat16 __half2bfloat16(__half h) { return __float2bfloat16(__half2float(h)); }

// ---- scalar arithmetic, comparisons and math, for both types
#define WB_HALF_OPS(T, T2, TOF, FROMF)                                                                          \
  static __forceinline__ T operator+(const T& a, const T& b) { return FROMF(TOF(a) + TOF(b)); }                \
  static __forceinline__ T operator-(const T& a, const T& b) { return FROMF(TOF(a) - TOF(b)); }                \
  static __forceinline__ T operator*(const T& a, const T& b) { return FROMF(TOF(a) * TOF(b)); }                \
  static __forceinline__ T operator/(const T& a, const T& b) { return FROMF(TOF(a) / TOF(b)); }                \
  static __forceinline__ T& operator+=(T& a, const T& b) { return a = a + b; }                                   \
  static __forceinline__ T& operator-=(T& a, const T& b) { return a = a - b; }                                   \
  static __forceinline__ T& operator*=(T& a, const T& b) { return a = a * b; }                                   \
  static __forceinline__ T& operator/=(T& a, const T& b) { return a = a / b; }                                   \
  static __forceinline__ T operator-(const T& a) { T r = a; r.__x ^= 0x8000u; return r; }                        \
  static __forceinline__ T operator+(const T& a) { return a; }                                                   \
  static __forceinline__ T& operator++(T& a) { return a = a + FROMF(1.0f); }                                     \
  static __forceinline__ T& operator--(T& a) { return a = a - FROMF(1.0f); }                                     \
  static __forceinline__ bool operator==(const T& a, const T& b) { return TOF(a) == TOF(b); }                  \
  static __forceinline__ bool operator!=(const T& a, const T& b) { return TOF(a) != TOF(b); }                  \
  static __forceinline__ bool operator<(const T& a, const T& b) { return TOF(a) < TOF(b); }                    \
  static __forceinline__ bool operator<=(const T& a, const T& b) { return TOF(a) <= TOF(b); }                  \
  static __forceinline__ bool operator>(const T& a, const T& b) { return TOF(a) > TOF(b); }                    \
  static __forceinline__ bool operator>=(const T& a, const T& b) { return TOF(a) >= TOF(b); }                  \
  static __forceinline__ T __hadd(T a, T b) { return a + b; }                                                    \
  static __forceinline__ T __hsub(T a, T b) { return a - b; }                                                    \
  static __forceinline__ T __hmul(T a, T b) { return a * b; }                                                    \
  static __forceinline__ T __hdiv(T a, T b) { return a / b; }                                                    \
  static __forceinline__ T __hadd_rn(T a, T b) { return a + b; }                                                 \
  static __forceinline__ T __hmul_rn(T a, T b) { return a * b; }                                                 \
  static __forceinline__ T __hfma(T a, T b, T c) { return FROMF(fmaf(TOF(a), TOF(b), TOF(c))); }               \
  static __forceinline__ T __hadd_sat(T a, T b) { return FROMF(__saturatef(TOF(a) + TOF(b))); }                \
  static __forceinline__ T __hmul_sat(T a, T b) { return FROMF(__saturatef(TOF(a) * TOF(b))); }                \
  static __forceinline__ T __hfma_sat(T a, T b, T c) { return FROMF(__saturatef(fmaf(TOF(a), TOF(b), TOF(c)))); } \
  static __forceinline__ T __hfma_relu(T a, T b, T c) { float r = fmaf(TOF(a), TOF(b), TOF(c)); return FROMF(r < 0.f ? 0.f : r); } \
  static __forceinline__ T __hneg(T a) { return -a; }                                                            \
  static __forceinline__ T __habs(T a) { T r = a; r.__x &= 0x7fffu; return r; }                                   \
  static __forceinline__ T __hmax(T a, T b) { return TOF(a) < TOF(b) ? b : a; }                                 \
  static __forceinline__ T __hmin(T a, T b) { return TOF(b) < TOF(a) ? b : a; }                                 \
  static __forceinline__ T __hmax_nan(T a, T b) { return isnan(TOF(a)) ? a : (isnan(TOF(b)) ? b : __hmax(a, b)); } \
  static __forceinline__ T __hmin_nan(T a, T b) { return isnan(TOF(a)) ? a : (isnan(TOF(b)) ? b : __hmin(a, b)); } \
  static __forceinline__ bool __heq(T a, T b) { return a == b; }                                                 \
  static __forceinline__ bool __hne(T a, T b) { return a != b; }                                                 \
  static __forceinline__ bool __hlt(T a, T b) { return a < b; }                                                  \
  static __forceinline__ bool __hle(T a, T b) { return a <= b; }                                                 \
  static __forceinline__ bool __hgt(T a, T b) { return a > b; }                                                  \
  static __forceinline__ bool __hge(T a, T b) { return a >= b; }                                                 \
  static __forceinline__ bool __hisnan(T a) { return isnan(TOF(a)); }                                            \
  static __forceinline__ int __hisinf(T a) { float f = TOF(a); return isinf(f) ? (f < 0 ? -1 : 1) : 0; }       \
  static __forceinline__ T hexp(T a) { return FROMF(expf(TOF(a))); }                                             \
  static __forceinline__ T hexp2(T a) { return FROMF(exp2f(TOF(a))); }                                           \
  static __forceinline__ T hexp10(T a) { return FROMF(exp10f(TOF(a))); }                                         \
  static __forceinline__ T hlog(T a) { return FROMF(logf(TOF(a))); }                                             \
  static __forceinline__ T hlog2(T a) { return FROMF(log2f(TOF(a))); }                                           \
  static __forceinline__ T hlog10(T a) { return FROMF(log10f(TOF(a))); }                                         \
  static __forceinline__ T hsqrt(T a) { return FROMF(sqrtf(TOF(a))); }                                           \
  static __forceinline__ T hrsqrt(T a) { return FROMF(1.0f / sqrtf(TOF(a))); }                                   \
  static __forceinline__ T hrcp(T a) { return FROMF(1.0f / TOF(a)); }                                            \
  static __forceinline__ T hsin(T a) { return FROMF(sinf(TOF(a))); }                                             \
  static __forceinline__ T hcos(T a) { return FROMF(cosf(TOF(a))); }                                             \
  static __forceinline__ T htanh(T a) { return FROMF(tanhf(TOF(a))); }                                           \
  static __forceinline__ T hfloor(T a) { return FROMF(floorf(TOF(a))); }                                         \
  static __forceinline__ T hceil(T a) { return FROMF(ceilf(TOF(a))); }                                           \
  static __forceinline__ T htrunc(T a) { return FROMF(truncf(TOF(a))); }                                         \
  static __forceinline__ T hrint(T a) { return FROMF(nearbyintf(TOF(a))); }                                      \
  static __forceinline__ T atomicAdd(T* p, T v) { WB_PROF_ATOMIC(p); return wb::atomic_cas_loop(p, [v](T o) { return o + v; }); }   \
  static __forceinline__ T atomicMax(T* p, T v) { WB_PROF_ATOMIC(p); return wb::atomic_cas_loop(p, [v](T o) { return __hmax(o, v); }); } \
  static __forceinline__ T atomicMin(T* p, T v) { WB_PROF_ATOMIC(p); return wb::atomic_cas_loop(p, [v](T o) { return __hmin(o, v); }); } \
  /* pairs */                                                                                                    \
  static __forceinline__ T2 operator+(const T2& a, const T2& b) { return T2(a.x + b.x, a.y + b.y); }            \
  static __forceinline__ T2 operator-(const T2& a, const T2& b) { return T2(a.x - b.x, a.y - b.y); }            \
  static __forceinline__ T2 operator*(const T2& a, const T2& b) { return T2(a.x * b.x, a.y * b.y); }            \
  static __forceinline__ T2 operator/(const T2& a, const T2& b) { return T2(a.x / b.x, a.y / b.y); }            \
  static __forceinline__ T2& operator+=(T2& a, const T2& b) { return a = a + b; }                                \
  static __forceinline__ T2& operator-=(T2& a, const T2& b) { return a = a - b; }                                \
  static __forceinline__ T2& operator*=(T2& a, const T2& b) { return a = a * b; }                                \
  static __forceinline__ T2 operator-(const T2& a) { return T2(-a.x, -a.y); }                                    \
  static __forceinline__ bool operator==(const T2& a, const T2& b) { return a.x == b.x && a.y == b.y; }          \
  static __forceinline__ T2 __hadd2(T2 a, T2 b) { return a + b; }                                                \
  static __forceinline__ T2 __hsub2(T2 a, T2 b) { return a - b; }                                                \
  static __forceinline__ T2 __hmul2(T2 a, T2 b) { return a * b; }                                                \
  static __forceinline__ T2 __h2div(T2 a, T2 b) { return a / b; }                                                \
  static __forceinline__ T2 __hfma2(T2 a, T2 b, T2 c) { return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static __forceinline__ T2 __hneg2(T2 a) { return -a; }                                                         \
  static __forceinline__ T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); }                              \
  static __forceinline__ T2 __hmax2(T2 a, T2 b) { return T2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }              \
  static __forceinline__ T2 __hmin2(T2 a, T2 b) { return T2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }              \
  static __forceinline__ T2 h2exp(T2 a) { return T2(hexp(a.x), hexp(a.y)); }                                     \
  static __forceinline__ T2 h2exp2(T2 a) { return T2(hexp2(a.x), hexp2(a.y)); }                                  \
  static __forceinline__ T2 h2log(T2 a) { return T2(hlog(a.x), hlog(a.y)); }                                     \
  static __forceinline__ T2 h2sqrt(T2 a) { return T2(hsqrt(a.x), hsqrt(a.y)); }                                  \
  static __forceinline__ T2 h2rsqrt(T2 a) { return T2(hrsqrt(a.x), hrsqrt(a.y)); }                               \
  static __forceinline__ T2 h2rcp(T2 a) { return T2(hrcp(a.x), hrcp(a.y)); }                                     \
  static __forceinline__ float __low2float(T2 a) { return TOF(a.x); }                                            \
  static __forceinline__ float __high2float(T2 a) { return TOF(a.y); }                                           \
  static __forceinline__ float2 __wb_2float2(T2 a) { return make_float2(TOF(a.x), TOF(a.y)); }                   \
  static __forceinline__ T2 __lowhigh2highlow(T2 a) { return T2(a.y, a.x); }                                     \
  static __forceinline__ T2 atomicAdd(T2* p, T2 v) { WB_PROF_ATOMIC(p); return wb::atomic_cas_loop(p, [v](T2 o) { return o + v; }); }

WB_HALF_OPS(__half, __half2, __half2float, __float2half)
WB_HALF_OPS(__nv_bfloat16, __nv_bfloat162, __bfloat162float, __float2bfloat16)
#undef WB_HALF_OPS

// ---- pair constructors / extractors
static __forceinline__ __half2 make_half2(__half a, __half b) { return __half2(a, b); }
static __forceinline__ __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static __forceinline__ __half2 __half2half2(__half a) { return __half2(a, a); }
static __forceinline__ __half2 __float2half2_rn(float f) { return __half2(__float2half(f), __float2half(f)); }
static __forceinline__ __half2 __floats2half2_rn(float a, float b) { return __half2(__float2half(a), __float2half(b)); }
static __forceinline__ float2 __half22float2(__half2 a) { return __wb_2float2(a); }
static __forceinline__ __half __low2half(__half2 a) { return a.x; }
static __forceinline__ __half __high2half(__half2 a) { return a.y; }
static __forceinline__ __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static __forceinline__ __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static __forceinline__ __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
static __forceinline__ __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }

static __forceinline__ __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static __forceinline__ __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static __forceinline__ __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static __forceinline__ __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(__float2bfloat16(f), __float2bfloat16(f)); }
static __forceinline__ __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b)); }
static __forceinline__ float2 __bfloat1622float2(__nv_bfloat162 a) { return __wb_2float2(a); }
static __forceinline__ __nv_bfloat16 __low2bfloat16(__nv_bfloat162 a) { return a.x; }
static __forceinline__ __nv_bfloat16 __high2bfloat16(__nv_bfloat162 a) { return a.y; }
static __forceinline__ __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
static __forceinline__ __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }
