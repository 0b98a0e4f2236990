"""Register the attention_bwd variants in teaching order (the torch baselines are registered with the contract)."""

from . import v1_triton_fa2_bwd  # noqa: F401
