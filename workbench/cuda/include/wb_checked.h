// Checked builds (RawKernel(..., checked=True)): every pointer parameter of a kernel becomes a wb::gptr<T>, a
// pointer that knows the bounds of the buffer it came from and reports out-of-bounds or misaligned accesses
// (like compute-sanitizer's memcheck) instead of touching foreign memory. The bad access is redirected to a
// per-thread scratch slot, so the kernel keeps running and every error of the launch gets reported.
//
// Checks apply to accesses through the parameter and pointers derived from it by arithmetic or
// reinterpret_cast (`p[i]`, `*(p + i)`, `reinterpret_cast<const float4*>(p)[j]`). A raw pointer taken from it
// (`float* q = p;`, `&p[i]`, a C-style cast) is no longer checked.
#pragma once

namespace wb {

__attribute__((noinline)) static void* oob_hit(int param, int kind, int64_t off, uint64_t size, uint64_t bytes) {
  wb_report_oob(param, kind, off, size, bytes, __builtin_return_address(0));
  if (size <= sizeof(((wb_thread*)nullptr)->scratch)) return wb_self()->scratch;
  static char big[1 << 16] __attribute__((aligned(64)));
  return big;
}

template <class T>
struct gptr {
  typedef T element_type;
  typedef typename std::add_lvalue_reference<T>::type ref;
  T* p;
  const char* lo;
  uint64_t bytes;
  int param;

  gptr() = default;
  gptr(T* q, const char* l, uint64_t b, int i) : p(q), lo(l), bytes(b), param(i) {}
  gptr(std::nullptr_t) : p(nullptr), lo(nullptr), bytes(0), param(-1) {}
  template <class U, class = typename std::enable_if<std::is_convertible<U*, T*>::value>::type>
  gptr(const gptr<U>& o) : p(o.p), lo(o.lo), bytes(o.bytes), param(o.param) {}

  template <class U>
  operator U*() const {
    return (U*)p;
  }
  explicit operator bool() const { return p != nullptr; }

  template <class E = T>
  __forceinline__ E* check(E* q) const {
    constexpr uint64_t n = sizeof(typename std::conditional<std::is_void<E>::value, char, E>::type);
    int64_t off = (const char*)q - lo;
    if (__builtin_expect(off < 0 || (uint64_t)off + n > bytes, 0))
      return (E*)oob_hit(param, std::is_const<E>::value ? 0 : 2, off, n, bytes);
    if (__builtin_expect(((uintptr_t)q & (alignof(typename std::conditional<std::is_void<E>::value, char, E>::type) - 1)) != 0, 0))
      return (E*)oob_hit(param, 3, off, n, bytes);
    return q;
  }

  const void* check_range(const void* q, uint64_t n, int kind) const {
    int64_t off = (const char*)q - lo;
    if (off < 0 || (uint64_t)off + n > bytes) return oob_hit(param, kind, off, n, bytes);
    return q;
  }

  template <class I, class = typename std::enable_if<std::is_integral<I>::value || std::is_enum<I>::value>::type>
  __forceinline__ ref operator[](I i) const {
    return *check(p + i);
  }
  __forceinline__ ref operator*() const { return *check(p); }
  __forceinline__ T* operator->() const { return check(p); }

  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  __forceinline__ gptr operator+(I i) const {
    return gptr(p + i, lo, bytes, param);
  }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  __forceinline__ friend gptr operator+(I i, const gptr& g) {
    return gptr(g.p + i, g.lo, g.bytes, g.param);
  }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  __forceinline__ gptr operator-(I i) const {
    return gptr(p - i, lo, bytes, param);
  }
  __forceinline__ ptrdiff_t operator-(const gptr& o) const { return p - o.p; }
  __forceinline__ ptrdiff_t operator-(const T* o) const { return p - o; }
  template <class I>
  __forceinline__ gptr& operator+=(I i) {
    p += i;
    return *this;
  }
  template <class I>
  __forceinline__ gptr& operator-=(I i) {
    p -= i;
    return *this;
  }
  __forceinline__ gptr& operator++() {
    ++p;
    return *this;
  }
  __forceinline__ gptr& operator--() {
    --p;
    return *this;
  }
  __forceinline__ gptr operator++(int) {
    gptr r = *this;
    ++p;
    return r;
  }
  __forceinline__ gptr operator--(int) {
    gptr r = *this;
    --p;
    return r;
  }
  bool operator==(std::nullptr_t) const { return p == nullptr; }
  bool operator!=(std::nullptr_t) const { return p != nullptr; }
  template <class U> bool operator==(const gptr<U>& o) const { return (const void*)p == (const void*)o.p; }
  template <class U> bool operator!=(const gptr<U>& o) const { return (const void*)p != (const void*)o.p; }
  template <class U> bool operator<(const gptr<U>& o) const { return (const void*)p < (const void*)o.p; }
  template <class U> bool operator<=(const gptr<U>& o) const { return (const void*)p <= (const void*)o.p; }
  template <class U> bool operator>(const gptr<U>& o) const { return (const void*)p > (const void*)o.p; }
  template <class U> bool operator>=(const gptr<U>& o) const { return (const void*)p >= (const void*)o.p; }
  template <class U> bool operator==(const U* o) const { return (const void*)p == (const void*)o; }
  template <class U> bool operator!=(const U* o) const { return (const void*)p != (const void*)o; }
  template <class U> bool operator<(const U* o) const { return (const void*)p < (const void*)o; }
  template <class U> bool operator<=(const U* o) const { return (const void*)p <= (const void*)o; }
  template <class U> bool operator>(const U* o) const { return (const void*)p > (const void*)o; }
  template <class U> bool operator>=(const U* o) const { return (const void*)p >= (const void*)o; }
};

// reinterpret_cast<To>(x), rewritten to wb::rcast<To>(x) in checked builds: keeps the bounds when the source is
// a checked pointer and the target a pointer type.
template <class To, class From>
__forceinline__ decltype(auto) rcast(From&& f) {
  typedef typename std::decay<From>::type D;
  if constexpr (is_gptr<D>::value) {
    if constexpr (std::is_pointer<To>::value) {
      typedef typename std::remove_pointer<To>::type E;
      return gptr<E>(reinterpret_cast<E*>(f.p), f.lo, f.bytes, f.param);
    } else {
      return reinterpret_cast<To>(f.p);
    }
  } else {
    return reinterpret_cast<To>(f);
  }
}

}  // namespace wb

// Overloads so that atomics and load intrinsics check their address too.
#define WB_CHECKED_FWD(NAME)                                                                         \
  template <class T, class... A>                                                                     \
  __forceinline__ auto NAME(wb::gptr<T> p, A... a) -> decltype(NAME((T*)nullptr, a...)) {            \
    return NAME(p.check(p.p), a...);                                                                 \
  }
WB_CHECKED_FWD(atomicAdd)
WB_CHECKED_FWD(atomicSub)
WB_CHECKED_FWD(atomicExch)
WB_CHECKED_FWD(atomicMax)
WB_CHECKED_FWD(atomicMin)
WB_CHECKED_FWD(atomicCAS)
WB_CHECKED_FWD(atomicAnd)
WB_CHECKED_FWD(atomicOr)
WB_CHECKED_FWD(atomicXor)
WB_CHECKED_FWD(atomicInc)
WB_CHECKED_FWD(atomicDec)
template <class T>
__forceinline__ typename std::remove_const<T>::type __ldg(wb::gptr<T> p) {
  return *p.check(p.p);
}
