// Barrier and warp-collective misuse for the CPU engine's synccheck (tests/test_synccheck.py), and the correct
// versions of the same kernels, which must stay clean.

// Threads 16.. skip the barrier and exit: only part of the block reaches it.
extern "C" __global__ void half_barrier(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = (float)threadIdx.x;
  if (threadIdx.x < 16) __syncthreads();  // BUG: a barrier in a branch the block does not take as one
  out[threadIdx.x] = s[(threadIdx.x + 1) % 16];
}

// The usual early return before a block reduction's barrier.
extern "C" __global__ void early_return_sum(const float* x, float* out, int n) {
  __shared__ float s[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;  // BUG: the tail block's last threads never reach the barrier below
  s[threadIdx.x] = x[i];
  __syncthreads();  // the tail block's exited threads never arrive
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int k = 0; k < blockDim.x && blockIdx.x * blockDim.x + k < n; ++k) t += s[k];
    out[blockIdx.x] = t;
  }
}

// The fixed reduction: every thread reaches the barrier, the tail loads zero.
extern "C" __global__ void guarded_sum(const float* x, float* out, int n) {
  __shared__ float s[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// A warp sum over the first n lanes, with the full mask inside `if (lane < n)`: lanes n.. exit without taking
// part (the online-softmax bug).
extern "C" __global__ void partial_warp_sum(const float* x, float* out, int n) {
  int lane = threadIdx.x % 32;
  if (lane < n) {
    float v = x[lane];
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);  // BUG: mask names all 32
    if (lane == 0) out[0] = v;
  }
}

// The same sum, right: every lane takes part, the others contribute zero.
extern "C" __global__ void full_warp_sum(const float* x, float* out, int n) {
  int lane = threadIdx.x % 32;
  float v = lane < n ? x[lane] : 0.0f;
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  if (lane == 0) out[0] = v;
}

// Lanes in two branches call two different shuffles with the full mask: not converged.
extern "C" __global__ void split_shuffles(const float* x, float* out) {
  int lane = threadIdx.x % 32;
  float v = x[lane];
  if (lane < 8)
    v = __shfl_xor_sync(0xffffffffu, v, 1);  // BUG
  else
    v = __shfl_xor_sync(0xffffffffu, v, 2);  // BUG
  out[lane] = v;
}

// The mask leaves out the calling lanes.
extern "C" __global__ void mask_without_me(const float* x, float* out) {
  int lane = threadIdx.x % 32;
  out[lane] = __shfl_sync(0x0000ffffu, x[lane], 0);  // BUG for lanes 16..31
}

// A shuffle inside a branch with the branch's own lanes as its mask: correct.
extern "C" __global__ void branch_mask(const float* x, float* out) {
  int lane = threadIdx.x % 32;
  float v = x[lane];
  if (lane < 16) v += __shfl_xor_sync(0x0000ffffu, v, 1);
  else v += __shfl_xor_sync(0xffff0000u, v, 1);
  out[lane] = v;
}

// Half of each warp waits at the block barrier, the other half at a warp shuffle: no one can go on.
extern "C" __global__ void barrier_vs_shuffle(float* out) {
  float v = threadIdx.x;
  if (threadIdx.x % 32 < 16) __syncthreads();  // BUG
  else v = __shfl_sync(0xffffffffu, v, 0);
  out[threadIdx.x] = v;
}
