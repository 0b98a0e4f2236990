// Planted bugs: an off-by-one out-of-bounds write, a missing __syncthreads, divergent barrier, failed assert.
#include <assert.h>

extern "C" __global__ void oob_write(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.0f;  // BUG: should be i < n
}

extern "C" __global__ void oob_read_vec4(const float* in, float* out, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(in)[i + 1];  // BUG: reads one float4 past the end at the last i
    out[i] = v.x + v.y + v.z + v.w;
  }
}

// Reverse a block's slice through shared memory. Without the barrier, thread t reads s[n-1-t] before the thread
// that writes it has run: the engine runs each thread up to its next barrier in order, so this fails every time.
extern "C" __global__ void reverse_nosync(const float* in, float* out) {
  __shared__ float s[256];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  s[t] = in[base + t];
  // BUG: missing __syncthreads();
  out[base + t] = s[blockDim.x - 1 - t];
}

extern "C" __global__ void reverse_sync(const float* in, float* out) {
  __shared__ float s[256];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[blockDim.x - 1 - t];
}

extern "C" __global__ void divergent_barrier(float* out) {
  float v = threadIdx.x;
  if (threadIdx.x % 32 < 16)
    __syncthreads();  // BUG: half of each warp waits here for the whole block...
  else
    v = __shfl_sync(0xffffffffu, v, 0);  // ...while the other half waits for its full warp: deadlock
  out[threadIdx.x] = v;
}

extern "C" __global__ void device_assert(const int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(x[i] >= 0);
}
