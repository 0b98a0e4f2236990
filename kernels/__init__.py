"""The kernels: one sub-package per op, each a float64 reference then variants in teaching order.

Importing this package registers every op *contract* (cheap: torch only). An op's variants are imported, and so
registered, the first time :func:`workbench.variants` is asked for that op.
"""

import workbench  # noqa: F401  (decides cpu/gpu mode before any numba/triton import)

from . import (  # noqa: F401,E402,E501
    add_rmsnorm,
    all_gather,
    all_reduce,
    all_to_all,
    attention,
    attention_bwd,
    decode_attention,
    decode_attention_q8,
    gemm,
    gemm_fp8,
    gemm_fp8_block,
    gemm_mxfp4,
    gemm_w8a8,
    layernorm,
    layernorm_bwd,
    moe,
    moe_align,
    moe_fp8,
    moe_topk,
    reduce_scatter,
    ring_attention,
    rmsnorm,
    rope,
    softmax,
    tp_mlp,
    transpose,
    vecadd,
)
