// The given kernel of exercise layernorm-welford-merge: one warp per row, around the learner's welford_merge.
//
// Not a file of its own: kernels/layernorm/ex_common.py appends it to the exercise's source (ex_welford_solution.py's
// SOURCE), after the __device__ function it calls, and NVRTC (gpu mode) or the CPU engine compiles the whole.

// One warp (32 threads) per row: grid = M blocks of 32 threads. Lane l folds elements l, l + 32, ... into its
// state one at a time (an element v is the state (1, v, 0)), then five butterfly shuffles merge the 32 states:
// every lane ends with the row's (n, mean, M2), and var = M2 / n.
extern "C" __global__ void layernorm_welford_ex(const float* x, const float* w, const float* b, float* y, int n,
                                                float eps) {
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    int lane = threadIdx.x;
    float cnt = 0.0f, mean = 0.0f, m2 = 0.0f;  // the empty state
    for (int j = lane; j < n; j += 32) welford_merge(cnt, mean, m2, 1.0f, row[j], 0.0f);
    for (int off = 16; off > 0; off >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, cnt, off);
        float om = __shfl_xor_sync(0xffffffffu, mean, off);
        float o2 = __shfl_xor_sync(0xffffffffu, m2, off);
        welford_merge(cnt, mean, m2, ob, om, o2);
    }
    float rstd = rsqrtf(m2 / n + eps);
    for (int j = lane; j < n; j += 32) out[j] = (row[j] - mean) * rstd * w[j] + b[j];
}
