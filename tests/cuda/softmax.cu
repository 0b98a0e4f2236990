// Row softmax: one warp per row, online max/sum with warp shuffles; grid = rows, block = 32.
#include <math_constants.h>
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* row = x + (size_t)blockIdx.x * cols;
  float m = -CUDART_INF_F, s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) {
    float v = row[c];
    float nm = fmaxf(m, v);
    s = s * __expf(m - nm) + __expf(v - nm);
    m = nm;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
  }
  for (int c = threadIdx.x; c < cols; c += 32) y[(size_t)blockIdx.x * cols + c] = __expf(row[c] - m) / s;
}

// 3-D grid and block: every thread writes its global linear id; checks threadIdx/blockIdx/blockDim/gridDim.
extern "C" __global__ void index3d(int* out) {
  int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int id = bx * (blockDim.x * blockDim.y * blockDim.z) + tx;
  out[id] = id;
}
