"""Register the moe_fp8 variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("moe_fp8")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_block,  # per-group quant, gate/up with fused SwiGLU + requant, down with the combine
    wrong,  # wrong_bf16_intermediate skips the requantization; wrong_up_scale_row misreads the up rows' scales
)

LADDER = (
    "torch_dequant", "triton_block", "wrong_bf16_intermediate", "wrong_up_scale_row",
)
teaching_order("moe_fp8", LADDER)
