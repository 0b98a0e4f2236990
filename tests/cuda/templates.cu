// Templates: instantiated by extern "C" wrappers and by RawModule name_expressions.
template <typename T, int BLOCK>
__global__ void scale_t(const T* __restrict__ x, T* __restrict__ y, T alpha, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}

extern "C" __global__ void scale_f32(const float* x, float* y, float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + 1.0f;
}

// cp.async-style staging through cuda_pipeline.h (synchronous on the CPU engine)
#include <cuda_pipeline.h>
template <int TILE>
__device__ void stage(float* dst, const float* src) {
  __pipeline_memcpy_async(dst + threadIdx.x * 4, src + threadIdx.x * 4, 16);
  __pipeline_commit();
}

extern "C" __global__ void pipeline_sum4(const float* in, float* out) {
  __shared__ __align__(16) float tile[128 * 4];
  stage<128>(tile, in + blockIdx.x * 512);
  __pipeline_wait_prior(0);
  __syncthreads();
  float4 v = reinterpret_cast<const float4*>(tile)[threadIdx.x];
  out[blockIdx.x * 128 + threadIdx.x] = v.x + v.y + v.z + v.w;
}
