// 16x16 shared-memory tiled SGEMM: C[M,N] = A[M,K] @ B[K,N], row-major; block (16,16), grid (N/16, M/16).
#define TS 16
extern "C" __global__ void __launch_bounds__(TS * TS) sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                                                   float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TS][TS];
  __shared__ float Bs[TS][TS];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int t = 0; t < K; t += TS) {
    As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (t + ty < K && col < N) ? __ldg(&B[(t + ty) * N + col]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
