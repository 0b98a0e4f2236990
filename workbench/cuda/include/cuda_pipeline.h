// CPU-engine stand-in for CUDA's <cuda_pipeline.h>: the "async" copies are done synchronously, so commit and
// wait are no-ops (the results are the same as on a GPU for correctly synchronised code).
#pragma once
#include "wb_cuda.h"

static __forceinline__ void __pipeline_memcpy_async(void* dst, const void* src, size_t size_and_align,
                                                    size_t zfill = 0) {
#if defined(WB_CHECKED) || defined(WB_PROFILE)  // the C library's memcpy is not instrumented: log both sides
  wb::san_copy(dst, src, size_and_align - zfill);
  if (zfill) wb::san_zero((char*)dst + (size_and_align - zfill), zfill);
#else
  std::memcpy(dst, src, size_and_align - zfill);
  if (zfill) std::memset((char*)dst + (size_and_align - zfill), 0, zfill);
#endif
}
static __forceinline__ void __pipeline_commit() {}
static __forceinline__ void __pipeline_wait_prior(size_t) {}
static __forceinline__ void __pipeline_arrive_on(void*) {}
