"""Register the gemm_w8a8 variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("gemm_w8a8")``:
the baseline (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_int8,
    v2_cuda_dp4a,
    v3_cuda_mma,
    wrong,  # wrong_scale_first: each product dequantized first and the sum kept in bf16
)
from .reference import OP_NAME

LADDER = ("torch_int_mm", "triton_int8", "cuda_dp4a", "cuda_mma", "wrong_scale_first")
teaching_order(OP_NAME, LADDER)
