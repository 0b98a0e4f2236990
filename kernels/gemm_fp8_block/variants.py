"""Register the gemm_fp8_block variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("gemm_fp8_block")``:
the baseline (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_block,  # K steps of one 128-group, each fp32 partial scaled by its group's pair of scales
    wrong,  # wrong_scale_first_group: a's first-group scale at every K step
)

LADDER = (
    "torch_dequant", "triton_block", "wrong_scale_first_group",
)
teaching_order("gemm_fp8_block", LADDER)
