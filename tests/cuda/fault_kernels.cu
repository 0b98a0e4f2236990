// Kernels that fault (tests/test_cuda_faults.py): each one does something a GPU stops or leaves undefined, and the
// CPU engine must turn it into a launch error without killing the Python process. All compile with NVRTC too.

// Integer division by a runtime zero: x86 raises SIGFPE; a GPU does not trap (the result is unspecified).
extern "C" __global__ void div_by(const int* num, const int* den, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = num[i] / den[i];
}

// __trap() from device code: the GPU stops the launch with an illegal-instruction error.
extern "C" __global__ void trap_if_negative(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] < 0.0f) __trap();
}

// The inline-PTX spelling of the same trap.
extern "C" __global__ void ptx_trap(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] < 0.0f) asm volatile("trap;");
}

extern "C" __global__ void check_sorted(const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 1 < n) assert(x[i] <= x[i + 1]);
}

// An unchecked write `stride` elements past each thread's slot: with a large stride it lands far past the end of
// `out` (on the CPU, in memory malloc manages: heap corruption, unless the engine guards the buffer).
extern "C" __global__ void scatter_stride(float* out, int stride) {
  out[threadIdx.x * stride] = 1.0f;
}

// Reads `in` at an index past its end (no write): an out-of-bounds read.
extern "C" __global__ void gather_far(const float* in, float* out, int offset) {
  out[threadIdx.x] = in[threadIdx.x + offset];
}

// float4 access through `x + shift` (misaligned unless shift is a multiple of 4).
extern "C" __global__ void vec4_copy(const float* x, float* y, int shift) {
  float4 v = reinterpret_cast<const float4*>(x + shift)[threadIdx.x];
  reinterpret_cast<float4*>(y)[threadIdx.x] = v;
}

// float2 access through `x + shift` (misaligned for an odd shift): x86 does not fault on it, the engine still does.
extern "C" __global__ void vec2_copy(const float* x, float* y, int shift) {
  float2 v = reinterpret_cast<const float2*>(x + shift)[threadIdx.x];
  reinterpret_cast<float2*>(y)[threadIdx.x] = v;
}

// Scale in place: writes its argument (which must therefore be writable).
extern "C" __global__ void scale_inplace(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

// Reads a non-const parameter without writing it: a read-only array is fine here.
extern "C" __global__ void sum_nonconst(float* x, float* out, int n) {
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += x[i];
    out[0] = s;
  }
}

extern "C" __global__ void iota(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = (float)(blockIdx.x * blockDim.x + threadIdx.x); }
