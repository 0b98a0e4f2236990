// vecadd in CUDA C: one thread per element, loaded by workbench.cuda.RawKernel (cupy.RawKernel on a GPU).
#include <cuda_fp16.h>

extern "C" __global__ void vecadd_f32(const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // the last block is partial when n % blockDim.x != 0
        out[i] = x[i] + y[i];
    }
}

extern "C" __global__ void vecadd_f16(const __half* __restrict__ x, const __half* __restrict__ y,
                                      __half* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = __hadd(x[i], y[i]);
    }
}
