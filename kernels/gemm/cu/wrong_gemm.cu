// Known-wrong shared-memory GEMMs (fp32, 32x32 tiles, 1024 threads per block), each with one classic bug.
#define TS 32

// BUG: a common shape of this race. Interior blocks (a full 32x32 tile of c) take a fast path that is
// synchronised correctly; blocks on the ragged bottom/right edge take a separately written guarded path that
// forgot both __syncthreads(). There a thread reads As/Bs entries other threads have not written yet (or has
// already overwritten with the next K tile), so exactly the edge tiles of c come out wrong.
extern "C" __global__ void sgemm_smem_nosync(const float* a, const float* b, float* c, int M, int N, int K) {
  __shared__ float As[TS][TS];
  __shared__ float Bs[TS][TS];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  bool interior = (blockIdx.y + 1) * TS <= M && (blockIdx.x + 1) * TS <= N;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    if (interior) {
      As[ty][tx] = k0 + tx < K ? a[row * K + k0 + tx] : 0.0f;
      Bs[ty][tx] = k0 + ty < K ? b[(k0 + ty) * N + col] : 0.0f;
      __syncthreads();
      for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
      __syncthreads();
    } else {
      As[ty][tx] = (row < M && k0 + tx < K) ? a[row * K + k0 + tx] : 0.0f;
      Bs[ty][tx] = (k0 + ty < K && col < N) ? b[(k0 + ty) * N + col] : 0.0f;
      // missing: __syncthreads();
      for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
      // missing: __syncthreads();
    }
  }
  if (row < M && col < N) c[row * N + col] = acc;
}

// BUG: the K loop runs over full tiles only (k0 + TS <= K), so the last K % 32 terms of every dot are lost.
extern "C" __global__ void sgemm_smem_k_tail(const float* a, const float* b, float* c, int M, int N, int K) {
  __shared__ float As[TS][TS];
  __shared__ float Bs[TS][TS];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 + TS <= K; k0 += TS) {
    As[ty][tx] = row < M ? a[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = col < N ? b[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) c[row * N + col] = acc;
}
