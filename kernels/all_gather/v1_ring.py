"""all_gather, ring: n - 1 steps; each rank forwards to its right neighbour the piece it received last.

Step s: rank r sends piece (r - s) (its own at step 0) and receives piece (r - s - 1) from its left neighbour,
straight into its place in the output. After n - 1 steps every piece has gone once around the ring. The lengths
are gathered first (one tiny collective), so each receive knows its size.
"""

from __future__ import annotations

import torch

from kernels._comm import exchange, rank_world, ring_peers
from kernels.all_gather.reference import piece_lengths
from workbench import empty, register


@register("all_gather", "ring", backend="torch",
          idea="Ring: n-1 steps, each forwarding the piece received last to the right, received in place.")
def ring(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    lens = piece_lengths(x.shape[0], group, x.device)
    starts = [sum(lens[:r]) for r in range(world)]
    out = empty((sum(lens),), x.dtype, x.device)
    pieces = [out[starts[r]:starts[r] + lens[r]] for r in range(world)]
    pieces[rank].copy_(x)
    right, left = ring_peers(rank, world)
    for s in range(world - 1):
        exchange(pieces[(rank - s) % world], right, pieces[(rank - s - 1) % world], left, group)
    return out
