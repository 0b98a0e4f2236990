// Warp votes and all shuffle variants (broadcast, up, down, xor with width 16).
extern "C" __global__ void vote(const int* x, unsigned* ballots, int* anys, int* alls) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int p = x[i] > 0;
  unsigned b = __ballot_sync(0xffffffffu, p);
  int a = __any_sync(0xffffffffu, p);
  int l = __all_sync(0xffffffffu, p);
  if ((threadIdx.x & 31) == 0) {
    int w = i / 32;
    ballots[w] = b;
    anys[w] = a;
    alls[w] = l;
  }
}

extern "C" __global__ void shfl_variants(const int* x, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  out[i * 4 + 0] = __shfl_sync(0xffffffffu, v, 3);
  out[i * 4 + 1] = __shfl_up_sync(0xffffffffu, v, 2);
  out[i * 4 + 2] = __shfl_down_sync(0xffffffffu, v, 5, 16);
  out[i * 4 + 3] = __shfl_xor_sync(0xffffffffu, v, 7, 16);
}

extern "C" __global__ void count_positive(const int* x, int* out) {
  int p = x[blockIdx.x * blockDim.x + threadIdx.x] > 0;
  int c = __syncthreads_count(p);
  int any = __syncthreads_or(p);
  int all = __syncthreads_and(p);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = c;
    out[blockIdx.x * 3 + 1] = any;
    out[blockIdx.x * 3 + 2] = all;
  }
}
