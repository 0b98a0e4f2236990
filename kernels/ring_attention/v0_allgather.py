"""Baseline: gather every rank's K and V (one all_gather each), then one local attention over the whole sequence.

Simple and correct, and what the ring avoids: every rank holds the whole sequence's K and V at once (memory grows
with world * S) and computes nothing until the gather is done.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels.ring_attention._ring import place
from workbench import register


@register("ring_attention", "torch_allgather", backend="torch",
          idea="Baseline: all_gather K and V from every rank, then one (causal-offset) attention over them.")
def torch_allgather(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None,
                    causal: bool = False) -> torch.Tensor:
    rank, world, _, _ = place(group)
    ks, vs = [torch.empty_like(k) for _ in range(world)], [torch.empty_like(v) for _ in range(world)]
    dist.all_gather(ks, k.contiguous(), group=group)
    dist.all_gather(vs, v.contiguous(), group=group)
    kk, vv = torch.cat(ks[:rank + 1] if causal else ks, dim=2), torch.cat(vs[:rank + 1] if causal else vs, dim=2)
    s = q.shape[2]
    scores = (q.float() @ kk.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:  # query i of rank r sits at r*S + i and sees keys j <= r*S + i
        i = torch.arange(s, device=q.device)[:, None] + rank * s
        j = torch.arange(kk.shape[2], device=q.device)[None, :]
        scores = scores.masked_fill(j > i, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vv.float()).to(q.dtype)
