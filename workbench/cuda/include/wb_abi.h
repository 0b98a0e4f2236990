// ABI shared by the CPU engine's runtime (runtime/wb_runtime.cpp) and every compiled kernel module.
//
// Each CUDA thread runs as a fiber on a stack of WB_STACK_SIZE bytes aligned to WB_STACK_SIZE; the fiber's
// wb_thread record sits at the top of that stack, so device code finds "its" thread from the stack pointer
// alone (no thread-local lookup on the hot path).
#pragma once
#include <cstddef>
#include <cstdint>

#define WB_ABI_VERSION 6
#define WB_STACK_SIZE (256u * 1024u)

struct wb_uint3 {
  unsigned int x, y, z;
};

// Profile builds: one logged memory access of a fiber (see wb_sanitize.h and the runtime's profile mode).
struct wb_prof_entry {
  uint64_t addr;
  uint32_t pc;          // low 32 bits of the access's address in the code (its "site")
  uint32_t size_flags;  // bytes (low 28 bits) | WB_SAN_* flags << 28
};
#define WB_PROF_SIZE_MASK 0x0FFFFFFFu

struct wb_thread {
  wb_uint3 threadIdx, blockIdx, blockDim, gridDim;
  unsigned lane, warp;
  void* dyn_smem;
  void* runtime;  // the runtime's private fiber record
  wb_prof_entry* prof_cur;  // profile builds: the fiber's access log (next free entry, end of its buffer)
  wb_prof_entry* prof_end;
  // checked builds: the source line of the warp collective being called (synccheck compares the lanes' sites)
  const char* site_file;
  unsigned site_line;
};

// Flags of wb_san_access (checked builds: every memory access of device code that is not to the fiber's own
// stack, seen through the compiler's -fsanitize=thread instrumentation).
#define WB_SAN_READ 1u
#define WB_SAN_WRITE 2u
#define WB_SAN_ATOMIC 4u
#define WB_SAN_MISALIGNED 8u  // -fsanitize=alignment: a pointer to T is used at an address not a multiple of alignof(T)

extern "C" {
void wb_syncthreads(void);
int wb_syncthreads_op(int pred, int op);  // op: 0 count, 1 and, 2 or
// Warp collective: every participating lane deposits `v`; returns the 32 deposited values of this round and
// the mask of lanes that took part in it.
const uint64_t* wb_warp_gather(unsigned mask, uint64_t v, unsigned* active);
void wb_syncwarp(unsigned mask);
__attribute__((noreturn)) void wb_trap(const char* what, const char* file, int line);
// checked builds: one memory access of device code (flags WB_SAN_*); `pc` is its address in the kernel module.
void wb_san_access(const void* addr, uint64_t size, unsigned flags, const void* pc);
// profile builds: the running fiber's log is full; returns where the next entry goes (the log grown).
wb_prof_entry* wb_prof_grow(void);
}

// The record's offset from the top of the stack is staggered by stack ("colour"), so that the records and the
// hot top-of-stack frames of the fibers of a block do not all map to the same cache sets.
#define WB_STACK_COLOR_BYTES 1088u
static inline wb_thread* wb_thread_of(uintptr_t base) {
  return (wb_thread*)(base + WB_STACK_SIZE - sizeof(wb_thread) - ((base / WB_STACK_SIZE) & 63u) * WB_STACK_COLOR_BYTES);
}
static inline wb_thread* wb_self(void) {
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  return wb_thread_of(sp & ~(uintptr_t)(WB_STACK_SIZE - 1));
}
