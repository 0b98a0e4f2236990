"""Known-wrong ring attention: the overlapped ring whose merge forgets to rescale the running output.

``wrong_merge_no_rescale`` folds each block's partial into a running state (max log-sum-exp ``m``, weight sum
``l``, weighted output ``acc``), and when a later block raises the max it rescales ``l`` but not ``acc``: the
earlier blocks keep weights measured against the old, smaller max, so they count too much. The output is still a
weighted average of the blocks' values (finite, plausible), wrong wherever the blocks' maxima differ. The same
mistake as decode attention's split-KV merge (``kernels/decode_attention/wrong.py``).

What the checker says: ``online_rescale``: the op's ``explain`` recomputes every rank's blocks in ring order, merges
them without the rescale (``merge_without_rescale``) and finds the output equal to it. With one rank (one block)
there is nothing to merge, and it passes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels.ring_attention._ring import place
from kernels.ring_attention.reference import block_attention, block_mask, ring_order
from workbench import comm, register


def fold_no_rescale(state: tuple, o_b: torch.Tensor, lse_b: torch.Tensor) -> tuple:
    """Fold one block's (o_b, lse_b) into the running (m, l, acc)."""
    m, l_sum, acc = state
    m_new = torch.maximum(m, lse_b)
    alpha = torch.exp(m - m_new)  # how much the old weights shrink against the new max
    w = torch.exp(lse_b - m_new)  # this block's weight against the new max
    l_sum = l_sum * alpha + w
    acc = acc + w[..., None] * o_b
    return m_new, l_sum, acc


@register("ring_attention", "wrong_merge_no_rescale", backend="torch", expected_diagnosis="online_rescale",
          idea="KNOWN WRONG: the running output is not rescaled when a later block raises the max log-sum-exp.")
def wrong_merge_no_rescale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None,
                           causal: bool = False) -> torch.Tensor:
    rank, world, right, left = place(group)
    kv = torch.stack([k, v])
    shape = q.shape[:-1]
    dev = q.device
    state = (torch.full(shape, float("-inf"), device=dev), torch.zeros(shape, device=dev),
             torch.zeros(q.shape, device=dev))
    for step, src in enumerate(ring_order(rank, world)):  # step 0 is this rank's own block: never skipped
        reqs, nxt = [], None
        if step < world - 1:
            nxt = torch.empty_like(kv)
            reqs = [dist.isend(kv, right, group=group), dist.irecv(nxt, left, group=group)]
        with comm.span("compute", note=f"block of rank {src}"):
            state = fold_no_rescale(state, *block_attention(q, kv[0], kv[1], block_mask(rank, src, causal)))
        for req in reqs:
            req.wait()
        if nxt is not None:
            kv = nxt
    _, l_sum, acc = state
    return (acc / l_sum[..., None]).to(q.dtype)
