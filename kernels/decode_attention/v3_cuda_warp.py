"""Paged decode attention in CUDA C, one warp per (sequence, query head), the block-table gather inline.

``cu/decode_warp.cu``: warp (b, h) reads block_table[b, p] once per page, then the page's valid slots; the lanes
split the head dim, a butterfly warp_sum gives the score and an online softmax keeps (m, l, acc) in registers.
Four warps per block (four query heads of one sequence). Each query head of a GQA group reads its KV head's pages
again: ``cuda_gqa`` reads them once per group.
"""

from __future__ import annotations

import torch

from ._host import cuda_launch, cuda_rung, start

WARPS = 4


@cuda_rung("cuda_warp", "decode_warp.cu", "decode_warp",
           idea="CUDA C: one warp per query head, one block-table read per page, warp_sum scores, online softmax.")
def cuda_warp(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    out, sc = start(q, scale)
    if out.numel():  # grid: (query heads / WARPS, sequences)
        cuda_launch("decode_warp.cu", "decode_warp", (-(-q.shape[1] // WARPS), q.shape[0]), 32 * WARPS, q, k_cache,
                    v_cache, block_table, seq_lens, (out,), sc)
    return out
