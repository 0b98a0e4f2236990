"""Register the moe_topk variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("moe_topk")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_cuda_topk,  # one warp per token: shuffle softmax, k rounds of warp argmax
    v2_triton_topk,  # a tile of tokens per program: row softmax, k rounds of row max
    wrong,  # wrong_ties_high_id: equal logits go to the higher expert id
)

LADDER = (
    "torch_topk", "cuda_topk", "triton_topk", "wrong_ties_high_id",
)
teaching_order("moe_topk", LADDER)
