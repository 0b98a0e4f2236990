// WMMA m16n16k16: half (or bf16) inputs, float accumulate. One warp per 16x16 output tile.
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;

// C[M,N] = A[M,K] (row-major) @ B[K,N] (given as B^T, i.e. col-major K x N with ld = K); grid = (N/16, M/16)
extern "C" __global__ void wmma_gemm_half(const __half* A, const __half* Bt, float* C, int M, int N, int K) {
  int tm = blockIdx.y, tn = blockIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tm * 16 * K + k, K);
    wmma::load_matrix_sync(b, Bt + tn * 16 * K + k, K);
    wmma::mma_sync(c, a, b, c);
  }
  for (int i = 0; i < c.num_elements; ++i) c.x[i] *= 2.0f;  // element-wise epilogue
  wmma::store_matrix_sync(C + tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

// bf16, both row-major, accumulator initialised from C (C += A @ B); staged through shared memory.
extern "C" __global__ void wmma_bf16_acc(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C) {
  __shared__ __nv_bfloat16 sa[16 * 16];
  __shared__ __nv_bfloat16 sb[16 * 16];
  for (int i = threadIdx.x; i < 256; i += 32) { sa[i] = A[i]; sb[i] = B[i]; }
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, sa, 16);
  wmma::load_matrix_sync(b, sb, 16);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, 16, wmma::mem_row_major);
}
