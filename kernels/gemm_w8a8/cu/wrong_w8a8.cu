// Known-wrong w8a8 GEMM: the scales applied before the sum, which is then kept in bf16. One thread per output.
#include "../../include/kernel_helpers.cuh"  // cuda_bf16.h

// BUG: every product is dequantized (a * scale_a times b * scale_b) and added to a bf16 running sum, so each of
// the K additions rounds to bf16's 8-bit significand. The int8 products are exact integers: summed in int32 and
// scaled once after the loop they lose nothing until the final rounding.
extern "C" __global__ void w8a8_scale_first(const signed char* a, const signed char* b, const float* scale_a,
    const float* scale_b, __nv_bfloat16* c, int M, int N, int K) {
  const int col = blockIdx.x * 16 + threadIdx.x, row = blockIdx.y * 16 + threadIdx.y;
  if (row >= M || col >= N) return;
  const float sa = scale_a[row], sb = scale_b[col];
  __nv_bfloat16 acc = __float2bfloat16(0.0f);
  for (int k = 0; k < K; ++k) {
    const float x = a[(size_t)row * K + k] * sa, w = b[(size_t)col * K + k] * sb;
    acc = __float2bfloat16(__bfloat162float(acc) + x * w);
  }
  c[(size_t)row * N + col] = acc;
}
