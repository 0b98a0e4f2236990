// 16-byte vector loads through reinterpret_cast<float4*>, make_float4, and the CUDA math API.
extern "C" __global__ void scale_float4(const float* __restrict__ in, float* __restrict__ out, float s, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(in)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
  }
}

__device__ __forceinline__ float sq(float x) { return x * x; }

// Ten columns: expf, __expf, exp2f, fmaxf(x, 0.5), rsqrtf, __fdividef(1, x), fmaf(x, x, 1), logf, sqrtf, tanhf.
extern "C" __global__ void math_funcs(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float* o = out + i * 10;
  o[0] = expf(v);
  o[1] = __expf(v);
  o[2] = exp2f(v);
  o[3] = fmaxf(v, 0.5f);
  o[4] = rsqrtf(v);
  o[5] = __fdividef(1.0f, v);
  o[6] = fmaf(v, v, 1.0f);
  o[7] = logf(v);
  o[8] = sqrtf(sq(v));
  o[9] = tanhf(v);
}

// Integer helpers and min/max overloads.
extern "C" __global__ void int_funcs(const unsigned* x, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  out[i * 4 + 0] = __popc(v);
  out[i * 4 + 1] = __clz((int)v);
  out[i * 4 + 2] = __brev(v);
  out[i * 4 + 3] = max(v, 1000u) - min(v, 1000u);
}
