// ABI shared by the CPU engine's runtime (runtime/wb_runtime.cpp) and every compiled kernel module.
//
// Each CUDA thread runs as a fiber on a stack of WB_STACK_SIZE bytes aligned to WB_STACK_SIZE; the fiber's
// wb_thread record sits at the top of that stack, so device code finds "its" thread from the stack pointer
// alone (no thread-local lookup on the hot path).
#pragma once
#include <cstddef>
#include <cstdint>

#define WB_ABI_VERSION 3
#define WB_STACK_SIZE (256u * 1024u)

struct wb_uint3 {
  unsigned int x, y, z;
};

struct wb_oob_record {  // one out-of-bounds / misaligned access seen in checked mode
  int param;            // kernel parameter index of the buffer
  int kind;             // 0 read, 1 write, 2 read-or-write (unknown), 3 misaligned
  int64_t offset;       // byte offset of the access from the buffer start
  uint64_t size;        // access size in bytes
  uint64_t buf_bytes;   // buffer size in bytes
  unsigned block[3], thread[3];
  int line;             // source line (from #line), 0 if unknown
  const char* file;
};

struct wb_thread {
  wb_uint3 threadIdx, blockIdx, blockDim, gridDim;
  unsigned lane, warp;
  void* dyn_smem;
  // checked mode: an invalid access is redirected to `scratch`, pre-filled with a canary so that a later look
  // tells whether the access was a write.
  int oob_pending;  // index of the record whose read/write kind is still unknown, -1 if none
  unsigned char scratch[64] __attribute__((aligned(64)));
  void* runtime;  // the runtime's private fiber record
};

extern "C" {
void wb_syncthreads(void);
int wb_syncthreads_op(int pred, int op);  // op: 0 count, 1 and, 2 or
// Warp collective: every participating lane deposits `v`; returns the 32 deposited values of this round and
// the mask of lanes that took part in it.
const uint64_t* wb_warp_gather(unsigned mask, uint64_t v, unsigned* active);
void wb_syncwarp(unsigned mask);
__attribute__((noreturn)) void wb_trap(const char* what, const char* file, int line);
int wb_report_oob(int param, int kind, int64_t offset, uint64_t size, uint64_t buf_bytes, const char* file,
                  int line);
void wb_oob_resolve(void);
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
