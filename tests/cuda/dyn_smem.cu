// Dynamic shared memory (extern __shared__), sized at launch with shared_mem=.
extern "C" __global__ void reverse_dyn(const float* in, float* out) {
  extern __shared__ float s[];
  int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[n - 1 - t];
}

// Inclusive Hillis-Steele scan of each block's slice, double-buffered in one dynamic allocation.
extern "C" __global__ void scan_dyn(const int* in, int* out) {
  extern __shared__ __align__(16) int buf[];
  int t = threadIdx.x, n = blockDim.x;
  int* a = buf;
  int* b = buf + n;
  a[t] = in[blockIdx.x * n + t];
  __syncthreads();
  for (int off = 1; off < n; off <<= 1) {
    b[t] = t >= off ? a[t] + a[t - off] : a[t];
    __syncthreads();
    int* tmp = a; a = b; b = tmp;
  }
  out[blockIdx.x * n + t] = a[t];
}
