// Kernels for the CPU engine's sanitizers (tests/test_sanitizers.py): each bug once, and the correct patterns
// that must stay clean (padding, double buffering, warp-synchronous code with __syncwarp, atomics).
#include <cuda_fp16.h>


// ---------------------------------------------------------------------------------------------- global memory
extern "C" __global__ void racy_counter(int* c) {
  c[0] = c[0] + 1;  // BUG: 16384 threads read-modify-write one int without an atomic
}

extern "C" __global__ void atomic_counter(int* c) { atomicAdd(c, 1); }

extern "C" __global__ void add_no_guard(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];  // BUG: no if (i < n)
}

// Block 1 reads what block 0 wrote: blocks are not ordered, so this is a race even though it "works" here.
extern "C" __global__ void cross_block(float* x) {
  if (blockIdx.x == 0) x[threadIdx.x] = 1.0f;
  else x[blockDim.x + threadIdx.x] = x[threadIdx.x] + 1.0f;  // BUG
}

extern "C" __global__ void misaligned_vec4(const float* in, float* out) {
  float4 v = reinterpret_cast<const float4*>(in + 1)[threadIdx.x];  // BUG: in + 1 is not 16-byte aligned
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// ---------------------------------------------------------------------------------------------- shared memory
extern "C" __global__ void smem_overflow(const float* in, float* out) {
  __shared__ float s[32];
  s[threadIdx.x] = in[threadIdx.x];  // BUG when launched with more than 32 threads
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

extern "C" __global__ void dyn_overflow(const float* in, float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x + 1] = in[threadIdx.x];  // BUG: the last thread writes one float past the launch's bytes
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x + 1];
}

extern "C" __global__ void uninit_read(float* out) {
  __shared__ float s[64];
  if (threadIdx.x < 32) s[threadIdx.x] = 1.0f;  // BUG: s[32..63] are never written...
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];  // ...but read here
}

extern "C" __global__ void uninit_int(int* out) {
  __shared__ int counts[8];
  atomicAdd(&counts[threadIdx.x % 8], 1);  // BUG: counts never zeroed
  __syncthreads();
  if (threadIdx.x < 8) out[threadIdx.x] = counts[threadIdx.x];
}

// Lanes of one warp: a lane reads what its neighbour wrote. Racy without __syncwarp (independent thread scheduling
// since Volta), fine with it.
extern "C" __global__ void warp_neighbour(const float* in, float* out, int sync) {
  __shared__ float s[32];
  int l = threadIdx.x;
  s[l] = in[l];
  if (sync) __syncwarp();
  out[l] = s[(l + 1) % 32];
}

// The classic warp-synchronous tree without __syncwarp (BUG on Volta and later) and with it.
extern "C" __global__ void tree_sum(const float* in, float* out, int sync) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  __syncthreads();
  if (t < 32) {
    float v = s[t] + s[t + 32];
    if (sync) __syncwarp();
    s[t] = v;
    for (int off = 16; off > 0; off /= 2) {
      if (sync) __syncwarp();
      if (t < off) v += s[t + off];
      if (sync) __syncwarp();
      if (t < off) s[t] = v;
    }
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void shuffle_sum(const float* in, float* out) {
  __shared__ float partial[32];
  int t = threadIdx.x;
  float v = in[blockIdx.x * blockDim.x + t];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  if ((t & 31) == 0) partial[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    v = t < blockDim.x / 32 ? partial[t] : 0.0f;
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (t == 0) out[blockIdx.x] = v;
  }
}

// Every thread gets the block's sum through one slot per warp in a function-local __shared__ array, the shape of
// kernels/include/kernel_helpers.cuh's block_sum. Called twice, the second call's `part[warp] = v` overwrites
// part[0] while threads of other warps may still be reading the first call's result: a WAR hazard unless a barrier
// separates the calls. (Every thread reads part[0]: the engine once kept only the last two readers per byte, lanes
// of the writer's own warp, and missed it.)
inline __device__ float slot_sum(float v) {
  __shared__ float part[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (lane == 0) part[warp] = v;  // slot_sum: one slot per warp
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) part[0] = v;
  }
  __syncthreads();
  return part[0];  // slot_sum: every thread reads the total
}

extern "C" __global__ void two_slot_sums(float* out, int sync) {
  float a = slot_sum(1.0f);
  if (sync) __syncthreads();  // without it: BUG, the second call rewrites the slots the first call's result is in
  float b = slot_sum((float)threadIdx.x);
  out[threadIdx.x] = a + b;
}

// Sum of x over tiles of 64, staged through two shared buffers: the load of tile t+1 overlaps the use of tile t,
// with one __syncthreads per tile (the buffer written in step t was last read before the barrier of step t-1).
extern "C" __global__ void double_buffered(const float* x, float* out, int tiles) {
  __shared__ float buf[2][64];
  int t = threadIdx.x;
  buf[0][t] = x[t];
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    int cur = k & 1;
    if (k + 1 < tiles) buf[cur ^ 1][t] = x[(k + 1) * 64 + t];
    acc += buf[cur][63 - t];
    __syncthreads();
  }
  out[t] = acc;
}

// The same without the barrier between tiles: the load of tile k+1 overwrites the buffer other threads still read.
extern "C" __global__ void double_buffered_nosync(const float* x, float* out, int tiles) {
  __shared__ float buf[2][64];
  int t = threadIdx.x;
  buf[0][t] = x[t];
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    int cur = k & 1;
    if (k + 1 < tiles) buf[cur ^ 1][t] = x[(k + 1) * 64 + t];
    acc += buf[cur][63 - t];  // BUG: no __syncthreads() at the end of the step
  }
  out[t] = acc;
}

extern "C" __global__ void smem_histogram(const int* x, int* bins, int n) {
  __shared__ int h[16];
  if (threadIdx.x < 16) h[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) atomicAdd(&h[x[i] & 15], 1);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
}

// Reads shared memory it never wrote: garbage on a GPU, 0xFF bytes (NaN, -1) on the CPU engine.
extern "C" __global__ void read_garbage(float* f, int* i, __half* h) {
  __shared__ float sf[32];
  __shared__ int si[32];
  __shared__ __half sh[32];
  f[threadIdx.x] = sf[threadIdx.x];
  i[threadIdx.x] = si[threadIdx.x];
  h[threadIdx.x] = sh[threadIdx.x];
}

// ---------------------------------------------------------------------------------------------- stopping launches
extern "C" __global__ void spin(const int* flag, float* out) {
  float v = 0.0f;
  while (flag[0] == 0) v += 1.0f;  // never ends while flag[0] == 0
  out[threadIdx.x] = v;
}

extern "C" __global__ void spin_barrier(const int* flag) {
  while (flag[0] == 0) __syncthreads();
}

extern "C" __global__ void busy(float* out, int k) {
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) acc = acc * 0.999f + (float)j;
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void iota(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = (float)threadIdx.x; }

extern "C" __global__ void wild_write(float* x, long long far) {
  x[threadIdx.x * far] = 1.0f;  // BUG: thread 1 writes 2^40 floats away: a segmentation fault on the CPU
}

__device__ int depth(int n) {
  volatile int pad[64];
  pad[n & 63] = n;
  return n <= 0 ? 0 : depth(n + 1) + pad[n & 63];  // the read after the call keeps every frame alive
}
extern "C" __global__ void endless_recursion(int* out) { out[threadIdx.x] = depth(1); }  // BUG: overflows the stack
