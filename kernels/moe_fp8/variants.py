"""Register the moe_fp8 variants (the torch baseline is registered with the contract)."""

from . import (  # noqa: F401
    v1_triton_block,  # per-group quant, gate/up with fused SwiGLU + requant, down with the combine
    wrong,  # wrong_bf16_intermediate skips the requantization; wrong_up_scale_row misreads the up rows' scales
)
