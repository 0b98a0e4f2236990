// Known-wrong vecadd in CUDA C: the commonest beginner bug, no `if (i < n)` guard. The grid is rounded up to whole
// blocks, so the threads of the last block past n read x[i], y[i] and write out[i] beyond the buffers: on a GPU
// garbage or an illegal-address error, on the CPU a corrupted heap. The checker runs it checked (memcheck) and
// reports the first out-of-bounds access with its thread, block and offset.

extern "C" __global__ void vecadd_unguarded_f32(const float* __restrict__ x, const float* __restrict__ y,
                                                float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i] + y[i];  // BUG: no `if (i < n)`: the tail threads of the last block run past the end
}
