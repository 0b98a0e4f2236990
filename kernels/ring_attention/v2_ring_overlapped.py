"""Ring attention, overlapped: the next K/V block is in flight while this one computes (double buffering).

Each step first posts the send of the block in hand to the right and the receive of the next block from the left
(``isend`` / ``irecv``), then computes on the block in hand, and only then waits. The transfer hides under the
compute when a block's attention takes longer than its message (on GPUs: long blocks, since compute grows with
S^2 and the message with S). Two buffers: the one being sent and computed on is only read, the other is being
received into; neither is touched before its wait.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels.ring_attention._ring import place
from kernels.ring_attention.reference import block_attention, block_mask, empty_state, merge, ring_order
from workbench import comm, register


@register("ring_attention", "ring_overlapped", backend="torch",
          idea="Ring with double buffering: post the next block's isend/irecv, compute this block, then wait.")
def ring_overlapped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None,
                    causal: bool = False) -> torch.Tensor:
    rank, world, right, left = place(group)
    kv = torch.stack([k, v])
    o, lse = empty_state(q)
    for step, src in enumerate(ring_order(rank, world)):
        reqs, nxt = [], None
        if step < world - 1:  # in flight during this block's compute
            nxt = torch.empty_like(kv)
            reqs = [dist.isend(kv, right, group=group), dist.irecv(nxt, left, group=group)]
        with comm.span("compute", note=f"block of rank {src}"):
            o_b, lse_b = block_attention(q, kv[0], kv[1], block_mask(rank, src, causal))
            o, lse = merge(o, lse, o_b, lse_b)
        for req in reqs:
            req.wait()
        if nxt is not None:
            kv = nxt
    return o.to(q.dtype)
