"""Register the layernorm variants; ``LADDER`` is their teaching order.

torch's baseline, CuPy array code (two passes), three CUDA C kernels (two-pass and Welford with a warp per row,
then a block per row for wide rows), Triton fused (tutorial 05's forward, which can also return mean and rstd),
known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,
    v1_cuda_warp,
    v2_cuda_welford,
    v3_cuda_block,
    v4_triton_fused,
    wrong,  # eps outside the square root; the unbiased variance (N - 1)
)

LADDER = ("torch_layer_norm", "cupy_two_pass", "cuda_warp", "cuda_welford", "cuda_block", "triton_fused",
           "wrong_eps_outside_sqrt", "wrong_unbiased_variance")
teaching_order("layernorm", LADDER)
