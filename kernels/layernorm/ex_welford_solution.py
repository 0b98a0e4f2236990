import torch

from kernels.layernorm.ex_common import WELFORD_KERNEL, welford_layernorm  # the kernel that merges, its launch

SOURCE = r"""
__device__ void welford_merge(float& n, float& mean, float& m2, float nb, float mean_b, float m2b) {
    // Merge the state (nb, mean_b, m2b) into (n, mean, m2): the count, mean and sum of squared deviations
    // (M2 = sum of (x - mean)^2) of all the elements both states summarise.
    // >>> learner
    //> // TODO: the merged count, mean and M2. Careful: two empty states (n + nb == 0) must stay empty.
    //> // So far the other state is dropped: each lane only ever sees its own elements.
    float nt = n + nb;
    if (nt == 0.0f) return;  // both empty (lanes past the end of a short row): nb / nt would be 0 / 0
    float delta = mean_b - mean;
    float fb = nb / nt;  // the other state's share of the elements
    mean += delta * fb;
    m2 += m2b + delta * delta * n * fb;  // the spread between the two means: delta^2 * n * nb / (n + nb)
    n = nt;
    // <<< learner
}
""" + WELFORD_KERNEL  # layernorm_welford_ex: one warp per row, calling welford_merge (ex_welford_kernel.cuh)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return welford_layernorm(SOURCE, x, w, b, eps)
