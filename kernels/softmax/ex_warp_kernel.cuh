// The given kernel of exercise softmax-warp-shuffle: one warp per row, around the learner's warp_max and warp_sum.
//
// Not a file of its own: kernels/softmax/ex_common.py appends it to the exercise's source (ex_warp_solution.py's
// SOURCE), after the two __device__ functions it calls, and NVRTC (gpu mode) or the CPU engine compiles the whole.

#include <math_constants.h>

// One warp (32 threads) per row: grid = M blocks of 32 threads. Lane l reads elements l, l + 32, ... (coalesced)
// and keeps its own partial max and sum; warp_max and warp_sum give every lane the whole warp's.
extern "C" __global__ void softmax_warp(const float* x, float* y, int n) {
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    int lane = threadIdx.x;
    float mx = -CUDART_INF_F;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, row[j]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j < n; j += 32) s += expf(row[j] - mx);
    s = warp_sum(s);
    for (int j = lane; j < n; j += 32) out[j] = expf(row[j] - mx) / s;
}
