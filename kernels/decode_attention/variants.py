"""Register the decode_attention and lse_merge variants; ``LADDER`` / ``MERGE_LADDER`` are their teaching order.

decode_attention: the vendor baseline (dense gather + SDPA); CuPy array code (one padded dense gather, one masked
softmax: the first rung, as in every ladder); torch's loop over sequences; Numba with one block per (sequence,
head); three CUDA C kernels (a warp per query head; split-KV plus a merge kernel; one block per KV head serving its
whole GQA group); Triton split-KV plus merge, then the same with the group's query heads packed into tl.dot's M,
then with a fixed split size instead of a split count (batch-invariant rows); known-wrong kernels last. lse_merge:
torch, then the Triton and CUDA C merge kernels the split variants launch.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy_gather,  # CuPy array code: the pages gathered into padded dense K/V, one masked softmax
    v1_torch_naive,  # a Python loop over sequences
    v2_numba_block,  # a block per (sequence, head), scores in shared memory
    v3_cuda_warp,  # a warp per query head, the block-table gather inline
    v4_cuda_split,  # split-KV partials + merge kernel (and lse_merge/cuda_merge)
    v5_cuda_gqa,  # a block per KV head, pages staged once in shared memory for the group
    v6_triton_split,  # split-KV, GQA-grouped programs, online lse merge (and lse_merge/triton_merge)
    v7_triton_gqa_dot,  # split-KV with the group's query heads as tl.dot's M rows
    v8_triton_split_fixed,  # split-KV with a fixed split size, not count: batch-invariant rows
    wrong,  # tail off by one, GQA head mod, V read past seq_lens, dropped partial page, merge without rescale
)

LADDER = ("torch_sdpa", "cupy_gather", "torch_naive", "numba_block", "cuda_warp", "cuda_split", "cuda_gqa",
          "triton_split", "triton_gqa_dot", "triton_split_fixed", "wrong_tail_off_by_one", "wrong_gqa_head_mod",
          "wrong_reads_past_seq_len", "wrong_split_drops_partial_page", "wrong_merge_no_rescale")
MERGE_LADDER = ("torch_merge", "triton_merge", "cuda_merge", "wrong_merge_no_rescale")
teaching_order("decode_attention", LADDER)
teaching_order("lse_merge", MERGE_LADDER)
