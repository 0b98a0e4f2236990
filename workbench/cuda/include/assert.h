// CPU-engine stand-in for <assert.h> in device code: a failed assert stops the launch with a clear error
// (like CUDA's "device-side assert triggered") instead of aborting the Python process.
#include "wb_abi.h"
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : wb_trap("device-side assert failed: " #e, __FILE__, __LINE__))
#endif
