"""Register the gemm_fp8 variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("gemm_fp8")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton,
    v2_triton_fp8_tile,
    wrong,  # wrong_fp16_accumulator: the running sum in fp16 overflows on unscaled e4m3 products
)

LADDER = (
    "torch_scaled", "triton_fp8_tile", "triton_fp8_hopper", "wrong_fp16_accumulator",
)
teaching_order("gemm_fp8", LADDER)
