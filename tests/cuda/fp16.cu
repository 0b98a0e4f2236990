// __half / __nv_bfloat16 conversions (round to nearest even) and arithmetic.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void half_roundtrip(const float* x, __half* h, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[i] = __float2half(x[i]);
    back[i] = __half2float(h[i]);
  }
}

extern "C" __global__ void bf16_roundtrip(const float* x, __nv_bfloat16* h, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[i] = __float2bfloat16(x[i]);
    back[i] = __bfloat162float(h[i]);
  }
}

// out = [a+b, a*b, fma(a,b,a), exp(a), max(a,b), a-b (operator), -a, a/b] per element, in half
extern "C" __global__ void half_arith(const __half* a, const __half* b, __half* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = a[i], y = b[i];
  out[0 * n + i] = __hadd(x, y);
  out[1 * n + i] = __hmul(x, y);
  out[2 * n + i] = __hfma(x, y, x);
  out[3 * n + i] = hexp(x);
  out[4 * n + i] = __hmax(x, y);
  out[5 * n + i] = x - y;
  out[6 * n + i] = -x;
  out[7 * n + i] = x / y;
}

// half2 loads through reinterpret_cast, __hmul2 / __hadd2, and a bf16 dot product accumulated in float.
extern "C" __global__ void half2_axpy(const __half* x, const __half* y, __half* out, __half alpha, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n2) return;
  __half2 a2 = __half2half2(alpha);
  __half2 xv = reinterpret_cast<const __half2*>(x)[i];
  __half2 yv = reinterpret_cast<const __half2*>(y)[i];
  reinterpret_cast<__half2*>(out)[i] = __hadd2(__hmul2(a2, xv), yv);
}

extern "C" __global__ void bf16_dot(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += __bfloat162float(a[i]) * __bfloat162float(b[i]);
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}
