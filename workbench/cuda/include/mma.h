// CPU-engine stand-in for CUDA's <mma.h> (nvcuda::wmma).
//
// Every lane of the warp holds a full copy of the tile (x[] is the whole tile in row-major order, so
// num_elements = rows * cols rather than the GPU's per-lane share). Element-wise loops over x[] and all the
// *_sync operations therefore give the GPU's results; only code that assumes the GPU's lane-to-element mapping
// would differ. load/store synchronise the warp first, as a warp-wide operation does on the GPU; store_matrix_sync
// writes the tile from one lane (the lowest taking part), so that racecheck sees one writer per element.
#pragma once
#include "wb_cuda.h"
#include "wb_fp16.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

namespace detail {
template <class Use, int M, int N, int K> struct dims;
template <int M, int N, int K> struct dims<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K> struct dims<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K> struct dims<accumulator, M, N, K> { enum { rows = M, cols = N }; };
template <class T> struct storage { typedef T type; };
template <> struct storage<precision::tf32> { typedef float type; };
template <class T> struct ident { typedef T type; };
static __forceinline__ float to_f(float v) { return v; }
static __forceinline__ float to_f(double v) { return (float)v; }
static __forceinline__ float to_f(__half v) { return __half2float(v); }
static __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
static __forceinline__ float to_f(int v) { return (float)v; }
static __forceinline__ float to_f(signed char v) { return (float)v; }
static __forceinline__ float to_f(unsigned char v) { return (float)v; }
template <class T> __forceinline__ T from_f(float v) { return T(v); }
template <> __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }
template <> __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
static __forceinline__ float tf32_round(float f) {  // round to nearest even at 10 mantissa bits
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  typedef typename detail::storage<T>::type element_type;
  typedef element_type storage_element_type;
  enum { rows = detail::dims<Use, M, N, K>::rows, cols = detail::dims<Use, M, N, K>::cols };
  enum { num_elements = rows * cols };
  element_type x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L>
__forceinline__ void fill_fragment(fragment<Use, M, N, K, T, L>& f,
                                   const typename fragment<Use, M, N, K, T, L>::element_type& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

// matrix_a / matrix_b: layout is part of the fragment type
template <class Use, int M, int N, int K, class T, class L>
__forceinline__ void load_matrix_sync(fragment<Use, M, N, K, T, L>& f,
                                      const typename detail::ident<typename fragment<Use, M, N, K, T, L>::element_type>::type* p,
                                      unsigned ldm) {
  static_assert(!std::is_same<L, void>::value, "load_matrix_sync without a layout argument needs a row_major or "
                                               "col_major fragment (accumulators take a layout_t argument)");
  __syncwarp();
  typedef fragment<Use, M, N, K, T, L> F;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = std::is_same<L, row_major>::value ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}

// accumulator: layout given at run time
template <int M, int N, int K, class T>
__forceinline__ void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const typename detail::ident<T>::type* p,
                                      unsigned ldm, layout_t layout) {
  __syncwarp();
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.x[r * N + c] = layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}

template <int M, int N, int K, class T>
__forceinline__ void store_matrix_sync(typename detail::ident<T>::type* p, const fragment<accumulator, M, N, K, T, void>& f,
                                       unsigned ldm, layout_t layout) {
  unsigned active;
  wb_warp_gather(0xffffffffu, 0, &active);  // __syncwarp() that also says which lanes take part
  if (wb_self()->lane == (unsigned)__builtin_ctz(active))  // every lane holds the same tile: one of them stores it
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) {
        if (layout == mem_row_major)
          p[(size_t)r * ldm + c] = f.x[r * N + c];
        else
          p[(size_t)c * ldm + r] = f.x[r * N + c];
      }
  __syncwarp();
}

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
__forceinline__ void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                              const fragment<matrix_b, M, N, K, TB, LB>& b,
                              const fragment<accumulator, M, N, K, TC, void>& c, bool /*satf*/ = false) {
  constexpr bool tf32 = std::is_same<TA, precision::tf32>::value;
  float acc[M * N];
  for (int i = 0; i < M * N; ++i) acc[i] = detail::to_f(c.x[i]);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      float av = detail::to_f(a.x[i * K + k]);
      if (tf32) av = detail::tf32_round(av);
      for (int j = 0; j < N; ++j) {
        float bv = detail::to_f(b.x[k * N + j]);
        if (tf32) bv = detail::tf32_round(bv);
        acc[i * N + j] += av * bv;
      }
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = detail::from_f<typename fragment<accumulator, M, N, K, TD, void>::element_type>(acc[i]);
}

static __forceinline__ float __float_to_tf32(float f) { return detail::tf32_round(f); }
}  // namespace wmma
}  // namespace nvcuda
