import torch
import torch.distributed as dist

from kernels.ring_attention._ring import place  # (rank, world, right, left) in the group
from kernels.ring_attention.reference import block_attention, block_mask, empty_state, merge, ring_order
from workbench import comm


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None, causal: bool = False) -> torch.Tensor:
    rank, world, right, left = place(group)
    kv = torch.stack([k, v])  # [2, B, H, S, D]: the K/V block in hand, one message per step
    o, lse = empty_state(q)
    for step, src in enumerate(ring_order(rank, world)):
        last = step == world - 1  # the last block goes nowhere: no transfer after it
        # >>> learner
        #> # TODO: while this block computes, the next one should already be on its way. Post the send of kv to
        #> #       the right neighbour and the receive of the next block from the left here (both asynchronous),
        #> #       unless this is the last step.
        #> nxt, reqs = kv, []  # so far: nothing moves, every rank attends to its own block world times
        nxt, reqs = None, []
        if not last:
            nxt = torch.empty_like(kv)  # a second buffer: kv is being sent and must not be overwritten
            reqs = [dist.isend(kv, right, group=group), dist.irecv(nxt, left, group=group)]
        # <<< learner
        with comm.span("compute", note=f"block of rank {src}"):
            o_b, lse_b = block_attention(q, kv[0], kv[1], block_mask(rank, src, causal))
            o, lse = merge(o, lse, o_b, lse_b)
        # >>> learner
        #> # TODO: the next block may only be read once its receive is complete (and kv only reused once its
        #> #       send is): wait for both, then make the received block the one in hand.
        #> kv = nxt
        for req in reqs:
            req.wait()
        if nxt is not None:
            kv = nxt
        # <<< learner
    return o.to(q.dtype)
