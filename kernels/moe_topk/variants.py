"""Register the moe_topk variants in teaching order (the torch baseline is registered with the contract)."""

from . import (  # noqa: F401
    v1_cuda_topk,  # one warp per token: shuffle softmax, k rounds of warp argmax
    v2_triton_topk,  # a tile of tokens per program: row softmax, k rounds of row max
    wrong,  # wrong_ties_high_id: equal logits go to the higher expert id
)
