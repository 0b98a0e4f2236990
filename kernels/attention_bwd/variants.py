"""Register the attention_bwd variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("attention_bwd")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton_fa2_bwd,
    wrong,  # wrong_no_delta: the dK/dV step computes dS = P * dP, without the softmax's - Delta
)

LADDER = (
    "torch_autograd", "torch_flash_bwd", "triton_fa2_bwd", "wrong_no_delta",
)
teaching_order("attention_bwd", LADDER)
