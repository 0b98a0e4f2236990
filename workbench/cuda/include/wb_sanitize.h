// Checked and profile builds: the memory-access hooks behind memcheck, racecheck, initcheck (checked) and the
// access counters of wb.profile (profile).
//
// Such a module is compiled with -fsanitize=thread (checked: also alignment) but NOT linked against the sanitizers'
// runtimes: the compiler only inserts a call before every load and store (__tsan_read4(addr), __tsan_write8(addr),
// ...), turns atomics into __tsan_atomic* calls and (checked) checks the alignment of every typed dereference. This
// header defines those hooks (hidden, so each module uses its own): an access to the fiber's own stack (locals, the
// thread record) returns at once; anything else
// * checked builds: goes to the runtime's wb_san_access with its size, read/write/atomic and the address of the
//   access in the code (for the source line). The runtime decides whether the address is shared memory, a
//   kernel's buffer (checked launches run on copies of the buffers with a redzone on each side), a redzone (out of
//   bounds) or none of these.
// * profile builds (WB_PROFILE): is appended to the fiber's access log (address, code site, size, flags; no call
//   into the runtime until the log is full). The runtime groups the logs of a warp's lanes into warp-level requests
//   at each barrier and counts them. Atomics are logged once per atomicXxx() call (wb_prof_atomic), not per
//   compare-and-swap attempt of the engine's loops.
#pragma once

#define WB_NO_SAN __attribute__((no_sanitize("thread")))
#define WB_SAN_HOOK extern "C" __attribute__((visibility("hidden"), used, noinline)) WB_NO_SAN

// Set by the runtime for the duration of a checked or profile launch (only fibers run module code then). Each
// module defines its own; the hooks below read it.
extern "C" __attribute__((visibility("default"))) int wb_san_enabled;
#ifndef WB_SAN_HOOKS
int wb_san_enabled = 0;
#endif

WB_NO_SAN static inline __attribute__((always_inline)) void wb_san_hook(const void* a, uint64_t n, unsigned f,
                                                                        const void* pc) {
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  if ((((uintptr_t)a) ^ sp) < (uintptr_t)WB_STACK_SIZE) return;  // the fiber's own stack
  if (!__atomic_load_n(&wb_san_enabled, __ATOMIC_RELAXED)) return;
#ifdef WB_PROFILE
  // wb_thread_of, spelled out: a sanitized inline function is not inlined into this unsanitized one
  uintptr_t base = sp & ~(uintptr_t)(WB_STACK_SIZE - 1);
  wb_thread* t = (wb_thread*)(base + WB_STACK_SIZE - sizeof(wb_thread) - ((base / WB_STACK_SIZE) & 63u) *
                                                                         WB_STACK_COLOR_BYTES);
  wb_prof_entry* e = t->prof_cur;
  if (__builtin_expect(e == t->prof_end, 0)) e = wb_prof_grow();
  e->addr = (uint64_t)(uintptr_t)a;
  e->pc = (uint32_t)(uintptr_t)pc;
  e->size_flags = (uint32_t)(n < WB_PROF_SIZE_MASK ? n : WB_PROF_SIZE_MASK) | (f << 28);
  t->prof_cur = e + 1;
#else
  wb_san_access(a, n, f, pc);
#endif
}

// The hooks themselves (WB_SAN_HOOKS) are compiled once per kind of build, checked or profile, into an object that
// each such module is linked with (workbench/cuda/_cpu_build.py: _hook_object): they are the same for every kernel,
// and compiling them into each module cost about 0.3 s of CPU a build. Hidden, they stay each module's own.
#ifdef WB_SAN_HOOKS
// An atomic operation: checked builds see it in the __tsan_atomic* hooks; profile builds count each atomicXxx() once
// (the engine's float atomics are a load and a compare-and-swap loop), from wb_prof_atomic.
#ifdef WB_PROFILE
#define WB_SAN_ATOMIC_HOOK(a, n, f, pc) ((void)0)
WB_SAN_HOOK void wb_prof_atomic(const void* a, unsigned n) {
  wb_san_hook(a, n, WB_SAN_READ | WB_SAN_WRITE | WB_SAN_ATOMIC, __builtin_return_address(0));
}
#else
#define WB_SAN_ATOMIC_HOOK(a, n, f, pc) wb_san_hook(a, n, f, pc)
#endif

#define WB_SAN_RW(N)                                                                                     \
  WB_SAN_HOOK void __tsan_read##N(void* a) {                                                            \
    wb_san_hook(a, N, WB_SAN_READ, __builtin_return_address(0));                        \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_write##N(void* a) {                                                           \
    wb_san_hook(a, N, WB_SAN_WRITE, __builtin_return_address(0));                       \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_unaligned_read##N(void* a) {                                                   \
    wb_san_hook(a, N, WB_SAN_READ, __builtin_return_address(0));                                         \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_unaligned_write##N(void* a) {                                                  \
    wb_san_hook(a, N, WB_SAN_WRITE, __builtin_return_address(0));                                        \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_volatile_read##N(void* a) {                                                    \
    wb_san_hook(a, N, WB_SAN_READ, __builtin_return_address(0));                        \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_volatile_write##N(void* a) {                                                   \
    wb_san_hook(a, N, WB_SAN_WRITE, __builtin_return_address(0));                       \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_unaligned_volatile_read##N(void* a) {                                          \
    wb_san_hook(a, N, WB_SAN_READ, __builtin_return_address(0));                                         \
  }                                                                                                      \
  WB_SAN_HOOK void __tsan_unaligned_volatile_write##N(void* a) {                                         \
    wb_san_hook(a, N, WB_SAN_WRITE, __builtin_return_address(0));                                        \
  }
WB_SAN_RW(1)
WB_SAN_RW(2)
WB_SAN_RW(4)
WB_SAN_RW(8)
WB_SAN_RW(16)

WB_SAN_HOOK void __tsan_read_range(void* a, unsigned long n) {
  wb_san_hook(a, n, WB_SAN_READ, __builtin_return_address(0));
}
WB_SAN_HOOK void __tsan_write_range(void* a, unsigned long n) {
  wb_san_hook(a, n, WB_SAN_WRITE, __builtin_return_address(0));
}
WB_SAN_HOOK void __tsan_init(void) {}
WB_SAN_HOOK void __tsan_func_entry(void*) {}
WB_SAN_HOOK void __tsan_func_exit(void) {}
WB_SAN_HOOK void __tsan_vptr_update(void**, void*) {}
WB_SAN_HOOK void __tsan_vptr_read(void**) {}
WB_SAN_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
WB_SAN_HOOK void __tsan_atomic_signal_fence(int) {}
// clang turns memcpy/memset/memmove into these; gcc calls the C library (see wb::san_copy for our own copies).
WB_SAN_HOOK void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  wb_san_hook(s, n, WB_SAN_READ, __builtin_return_address(0));
  wb_san_hook(d, n, WB_SAN_WRITE, __builtin_return_address(0));
  return memcpy(d, s, n);
}
WB_SAN_HOOK void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  wb_san_hook(s, n, WB_SAN_READ, __builtin_return_address(0));
  wb_san_hook(d, n, WB_SAN_WRITE, __builtin_return_address(0));
  return memmove(d, s, n);
}
WB_SAN_HOOK void* __tsan_memset(void* d, int c, unsigned long n) {
  wb_san_hook(d, n, WB_SAN_WRITE, __builtin_return_address(0));
  return memset(d, c, n);
}

// Atomics: the operation itself, seen as an atomic access (never a race with another atomic; reads count for
// initcheck, writes initialise).
#define WB_SAN_RMW (WB_SAN_READ | WB_SAN_WRITE | WB_SAN_ATOMIC)
#define WB_SAN_ATOMICS(N, T)                                                                                  \
  WB_SAN_HOOK T __tsan_atomic##N##_load(const volatile T* a, int) {                                          \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_READ | WB_SAN_ATOMIC, __builtin_return_address(0));         \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                           \
  WB_SAN_HOOK void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                       \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_WRITE | WB_SAN_ATOMIC, __builtin_return_address(0));        \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                 \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_exchange(volatile T* a, T v, int) {                                       \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_add(volatile T* a, T v, int) {                                      \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_sub(volatile T* a, T v, int) {                                      \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_and(volatile T* a, T v, int) {                                      \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_or(volatile T* a, T v, int) {                                       \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_xor(volatile T* a, T v, int) {                                      \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_fetch_nand(volatile T* a, T v, int) {                                     \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                           \
  WB_SAN_HOOK int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {           \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
  }                                                                                                           \
  WB_SAN_HOOK int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {             \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                           \
  WB_SAN_HOOK T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                 \
    WB_SAN_ATOMIC_HOOK((const void*)a, sizeof(T), WB_SAN_RMW, __builtin_return_address(0));                          \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
    return c;                                                                                                 \
  }
WB_SAN_ATOMICS(8, uint8_t)
WB_SAN_ATOMICS(16, uint16_t)
WB_SAN_ATOMICS(32, uint32_t)
WB_SAN_ATOMICS(64, uint64_t)

// -fsanitize=alignment: a pointer to T is dereferenced at an address that is not a multiple of alignof(T) (a
// float4 load from `p + 1`): a GPU faults ("misaligned address"). `data` is the compiler's TypeMismatchData:
// {file, line, column}, the type descriptor, then log2(alignment).
struct wb_type_mismatch {
  const char* file;
  unsigned line, column;
  const void* type;
  unsigned char log_alignment, check_kind;
};
WB_SAN_HOOK void __ubsan_handle_type_mismatch_v1(wb_type_mismatch* data, uintptr_t ptr) {
  if (ptr) wb_san_hook((const void*)ptr, 1u << data->log_alignment, WB_SAN_MISALIGNED, __builtin_return_address(0));
}
WB_SAN_HOOK void __ubsan_handle_type_mismatch_v1_abort(wb_type_mismatch* data, uintptr_t ptr) {
  __ubsan_handle_type_mismatch_v1(data, ptr);
}

#endif  // WB_SAN_HOOKS

// memcpy/memset/memmove of device code: the compiler expands small constant sizes into (instrumented) loads and
// stores, but calls the C library, which is not instrumented, for the others: tell the sanitizer about those.
WB_NO_SAN __attribute__((noinline)) static void wb_san_range(const void* a, size_t n, unsigned f) {
  wb_san_hook(a, n, f, __builtin_return_address(0));
}
static inline __attribute__((always_inline)) void* wb_san_memcpy(void* d, const void* s, size_t n) {
  if (!__builtin_constant_p(n) || n > 64) {
    wb_san_range(s, n, WB_SAN_READ);
    wb_san_range(d, n, WB_SAN_WRITE);
  }
  return __builtin_memcpy(d, s, n);
}
static inline __attribute__((always_inline)) void* wb_san_memmove(void* d, const void* s, size_t n) {
  if (!__builtin_constant_p(n) || n > 64) {
    wb_san_range(s, n, WB_SAN_READ);
    wb_san_range(d, n, WB_SAN_WRITE);
  }
  return __builtin_memmove(d, s, n);
}
static inline __attribute__((always_inline)) void* wb_san_memset(void* d, int c, size_t n) {
  if (!__builtin_constant_p(n) || n > 64) wb_san_range(d, n, WB_SAN_WRITE);
  return __builtin_memset(d, c, n);
}
namespace std {
using ::wb_san_memcpy;
using ::wb_san_memmove;
using ::wb_san_memset;
}  // namespace std
#define memcpy(d, s, n) wb_san_memcpy(d, s, n)
#define memmove(d, s, n) wb_san_memmove(d, s, n)
#define memset(d, c, n) wb_san_memset(d, c, n)

namespace wb {
static inline void san_copy(void* d, const void* s, size_t n) { memcpy(d, s, n); }
static inline void san_zero(void* d, size_t n) { memset(d, 0, n); }
}  // namespace wb
