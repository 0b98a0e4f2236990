"""GQA-grouped paged decode attention in CUDA C: one block per (sequence, KV head) serves its whole query group.

``cu/decode_gqa.cu``: the block's ``group = Hq / Hkv`` warps are the query heads that share one KV head. Each chunk
of a page is staged in shared memory once by the whole block and read by every warp, so K and V come from global
memory once per KV head instead of once per query head (``cuda_warp``): the traffic of a decode step drops by the
group size, which is what GQA was designed for (decode is memory-bound: ~1 FLOP per byte of KV cache).
"""

from __future__ import annotations

import torch

from ._host import cuda_launch, cuda_rung, head_dim_problem, start

MAX_GROUP = 32  # one warp per query head of the group: at most 1024 threads per block


def _supports(shape: dict) -> str | None:
    group = shape["Hq"] // max(1, shape["Hkv"])
    if group > MAX_GROUP:
        return f"decode_attention/cuda_gqa: one warp per query head of a group, Hq / Hkv <= {MAX_GROUP}, got {group}"
    return head_dim_problem("cuda_gqa", shape)


@cuda_rung("cuda_gqa", "decode_gqa.cu", "decode_gqa", supports=_supports,
           idea="CUDA C GQA-grouped: a block per KV head stages each page chunk in shared memory for its query warps.")
def cuda_gqa(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
             seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    out, sc = start(q, scale)
    hkv = k_cache.shape[2]
    if out.numel():  # grid: (KV heads, sequences); a warp per query head of the group
        cuda_launch("decode_gqa.cu", "decode_gqa", (hkv, q.shape[0]), 32 * (q.shape[1] // hkv), q, k_cache, v_cache,
                    block_table, seq_lens, (out,), sc)
    return out
