"""Register the layernorm_bwd variants; ``LADDER`` is their teaching order.

The torch baselines (registered with the contract) first, then dw/db reduced three ways in Triton: atomics,
tutorial 05's lock-guarded group buffers (both order-dependent) and the deterministic two-stage sum, then the
two-stage sum in CUDA C; known-wrong kernels last. ``LADDER``, not the order of the imports, decides the order
of ``wb.variants("layernorm_bwd")``.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_atomic,
    v2_triton_group_lock,
    v3_triton_two_stage,
    v4_cuda_two_stage,
    wrong,  # wrong_sum_over_n: the column sum of the partials reduces over N instead of over the CTAs
)

LADDER = (
    "torch_native_bwd", "torch_autograd", "triton_atomic", "triton_group_lock", "triton_two_stage", "cuda_two_stage",
    "wrong_sum_over_n",
)
teaching_order("layernorm_bwd", LADDER)
