import torch

from kernels.softmax.ex_common import WARP_KERNEL, warp_softmax  # the kernel that calls your two functions, its launch

SOURCE = r"""
__device__ float warp_max(float v) {
    // >>> learner
    //> // TODO: combine the 32 lanes' values with __shfl_xor_sync(0xffffffffu, v, off) for off = 16, 8, 4, 2, 1
    //> return v;  // so far: only this lane's own max
    for (int off = 16; off > 0; off >>= 1)  // butterfly: 16, 8, 4, 2, 1 lanes apart
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;  // every lane now holds the max of all 32
    // <<< learner
}

__device__ float warp_sum(float v) {
    // >>> learner
    //> // TODO: the same butterfly, adding instead of taking the max
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    // <<< learner
    return v;
}
""" + WARP_KERNEL  # softmax_warp: one warp (32 lanes) per row, calling warp_max and warp_sum (ex_warp_kernel.cuh)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return warp_softmax(SOURCE, x)
