"""Known-wrong all_gather: a ring that forwards its own piece but never copies it into its own output.

``wrong_own_piece_missing`` sends ``x`` straight from the input at step 0 (no copy needed for that) and forgets
that its own slot of the output still has to be filled: every rank's output misses exactly its own piece. The
output comes from ``wb.empty``, which the checker poisons, so those elements still hold the poison: ``unwritten``.
"""

from __future__ import annotations

import torch

from kernels._comm import exchange, rank_world, ring_peers
from kernels.all_gather.reference import piece_lengths
from workbench import empty, register


@register("all_gather", "wrong_own_piece_missing", backend="torch", expected_diagnosis="unwritten",
          dtypes=("float32",),
          idea="KNOWN WRONG: a ring that sends its own piece from the input but never writes it into its output.")
def wrong_own_piece_missing(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    lens = piece_lengths(x.shape[0], group, x.device)
    starts = [sum(lens[:r]) for r in range(world)]
    out = empty((sum(lens),), x.dtype, x.device)
    pieces = [out[starts[r]:starts[r] + lens[r]] for r in range(world)]
    right, left = ring_peers(rank, world)
    for s in range(world - 1):  # BUG: pieces[rank] is never written (x is sent directly at step 0)
        send = x if s == 0 else pieces[(rank - s) % world]
        exchange(send, right, pieces[(rank - s - 1) % world], left, group)
    return out
