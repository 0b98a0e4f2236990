// Warp-shuffle reductions: a warp sum with __shfl_down_sync and a block sum with __shfl_xor_sync + shared memory.
extern "C" __global__ void warp_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

__device__ __forceinline__ float warp_allreduce(float v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

extern "C" __global__ void __launch_bounds__(1024) block_sum(const float* x, float* out, int n) {
  __shared__ float partial[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = warp_allreduce(i < n ? x[i] : 0.0f);
  int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
  if (lane == 0) partial[wid] = v;
  __syncthreads();
  if (wid == 0) {
    int nw = (blockDim.x + warpSize - 1) / warpSize;
    v = lane < nw ? partial[lane] : 0.0f;
    v = warp_allreduce(v);
    if (lane == 0) out[blockIdx.x] = v;
  }
}

// Each warp: __syncwarp-separated tree reduction through shared memory.
extern "C" __global__ void syncwarp_sum(const int* x, int* out) {
  __shared__ int buf[256];
  int t = threadIdx.x;
  buf[t] = x[blockIdx.x * blockDim.x + t];
  __syncwarp();
  int lane = t & 31;
  for (int s = 16; s > 0; s >>= 1) {
    int v = lane < s ? buf[t + s] : 0;
    __syncwarp();
    if (lane < s) buf[t] += v;
    __syncwarp();
  }
  if (lane == 0) out[blockIdx.x * (blockDim.x / 32) + t / 32] = buf[t];
}
