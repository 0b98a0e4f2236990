// A warp-per-row softmax, llm.c style, with the classic bug: lanes with no element of a short row leave early,
// then the others shuffle with a full mask that still names them. Right for rows of >= 32 elements; for shorter
// rows a GPU's result is undefined, and compute-sanitizer's synccheck reports the shuffle.
extern "C" __global__ void softmax_lane_exit(const float* x, float* y, int m, int n) {
    int row = blockIdx.x;
    int lane = threadIdx.x;
    if (lane >= n) return;  // the bug: these lanes are named by the full-mask shuffles below
    const float* xr = x + (size_t)row * n;
    float mx = -__int_as_float(0x7f800000);  // -inf
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, xr[j]);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float s = 0.0f;
    for (int j = lane; j < n; j += 32) s += expf(xr[j] - mx);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int j = lane; j < n; j += 32) y[(size_t)row * n + j] = expf(xr[j] - mx) / s;
}
