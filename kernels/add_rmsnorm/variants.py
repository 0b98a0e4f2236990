"""Register the add_rmsnorm variants; ``LADDER`` is their teaching order.

The unfused torch pair first (two kernels: the baseline fusion is measured against), then the fused Triton and
CUDA C kernels, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_fused,
    v2_cuda_fused,
    wrong,  # wrong_eps_outside_sqrt: eps added after the sqrt, not under it
)

LADDER = ("torch_add_rms_norm", "triton_fused", "cuda_fused", "wrong_eps_outside_sqrt")
teaching_order("add_rmsnorm", LADDER)
