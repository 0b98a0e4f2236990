"""Register the attention_bwd variants in teaching order (the torch baselines are registered with the contract)."""

from . import (  # noqa: F401
    v1_triton_fa2_bwd,
    wrong,  # wrong_no_delta: the dK/dV step computes dS = P * dP, without the softmax's - Delta
)
