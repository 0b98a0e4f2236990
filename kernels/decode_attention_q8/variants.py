"""Register the decode_attention_q8 variants; ``LADDER`` is their teaching order.

The torch baseline (dequantize the cache, then decode_attention's gather + SDPA), a CUDA C warp per KV head
decoding byte codes once for its query heads, Triton split-KV with the scales folded into scores and weights; the
known-wrong kernel last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_cuda_gqa,  # a warp per KV head serves 8 query heads: codes decoded once in registers, scales per token
    v2_triton_split,  # split-KV, GQA-grouped programs, per-slot scales, decode_attention's lse merge
    wrong,  # the V scale forgotten in the P V step
)

LADDER = ("torch_dequant", "cuda_gqa", "triton_split", "wrong_v_scale_forgotten")
teaching_order("decode_attention_q8", LADDER)
