"""Ring attention, blocking: compute on the K/V block in hand, then pass it right and take the next from the left.

Each of the ``world`` steps attends this rank's queries to one K/V block (:func:`block_attention`: a partial output
and its log-sum-exp per query) and folds it into the running result (:func:`merge`, the LSE merge of split-KV
decoding); between steps the block moves one rank to the right. K and V travel as one tensor (one message per
step). Every exchange is posted and waited for before the next compute: the link and the compute take turns, so a
step costs compute + transfer. Memory: two K/V blocks per rank, whatever the world.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels.ring_attention._ring import place
from kernels.ring_attention.reference import block_attention, block_mask, empty_state, merge, ring_order
from workbench import comm, register


@register("ring_attention", "ring_blocking", backend="torch",
          idea="Ring: compute on the K/V block in hand, then exchange it with the neighbours; no overlap.")
def ring_blocking(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None,
                  causal: bool = False) -> torch.Tensor:
    rank, world, right, left = place(group)
    kv = torch.stack([k, v])  # [2, B, H, S, D]: one message per step
    o, lse = empty_state(q)
    for step, src in enumerate(ring_order(rank, world)):
        with comm.span("compute", note=f"block of rank {src}"):
            o_b, lse_b = block_attention(q, kv[0], kv[1], block_mask(rank, src, causal))
            o, lse = merge(o, lse, o_b, lse_b)
        if step < world - 1:
            nxt = torch.empty_like(kv)
            reqs = [dist.isend(kv, right, group=group), dist.irecv(nxt, left, group=group)]
            for req in reqs:  # wait now: nothing computes while the block travels
                req.wait()
            kv = nxt
    return o.to(q.dtype)
