"""Register the gemm_mxfp4 variants; ``LADDER`` is their teaching order (the baseline, registered with the
contract, first)."""

from workbench.registry import teaching_order

from . import v1_triton_decode, v2_triton_dot_scaled, wrong  # noqa: F401
from .reference import OP_NAME

LADDER = ("torch_dequant", "triton_decode", "triton_dot_scaled", "wrong_b_nibble_order")
teaching_order(OP_NAME, LADDER)
