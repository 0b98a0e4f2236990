// The given kernel of the transpose exercises (transpose-coalesce, transpose-bank-conflicts): each block of
// 32 x 8 threads moves one 32 x 32 tile of x into out, by the learner's transpose_block.
//
// Not a file of its own: kernels/transpose/ex_common.py appends it to the exercise's source (SOURCE in
// ex_coalesce_solution.py or ex_conflicts_solution.py), after the __device__ function it calls, and NVRTC (gpu
// mode) or the CPU engine compiles the whole. The launch: grid = (ceil(n / 32), ceil(m / 32)), block = (32, 8).

extern "C" __global__ void transpose_tile(const float* x, float* out, int m, int n) {
    transpose_block(x, out, m, n);  // tile (blockIdx.y, blockIdx.x) of x [m, n], written transposed into out [n, m]
}
