"""Decode attention in plain torch, one sequence at a time: the paged gather written out, no batching.

For each sequence b: its first ceil(seq_lens[b] / page) block-table entries name its pages; indexing the cache
with them and flattening (page, slot) gives its tokens in order, of which the first seq_lens[b] are real (the rest
of the last page is someone else's garbage, NaN in the checker's inputs). KV head h // group serves query head h
(``repeat_interleave`` over the head axis), then softmax(scale * K q) V in fp32. A Python loop of B small launches:
what every kernel below replaces with one launch over (sequence, head) pairs.
"""

from __future__ import annotations

import torch

from workbench import register

from .reference import default_scale, gather


@register("decode_attention", "torch_naive", backend="torch",
          idea="Plain torch, a Python loop over sequences: gather its pages, expand KV heads, fp32 softmax attention.")
def torch_naive(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    sc = default_scale(q.shape[-1], scale)
    group = q.shape[1] // k_cache.shape[2]
    out = torch.empty_like(q)
    for b, n in enumerate(seq_lens.tolist()):
        k = gather(k_cache, block_table[b], n).float().repeat_interleave(group, dim=1)  # [n, Hq, D]
        v = gather(v_cache, block_table[b], n).float().repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].float(), k) * sc
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v).to(q.dtype)
    return out
