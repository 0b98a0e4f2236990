"""all_reduce, chunked and pipelined ring: each ring chunk goes in ``PIECES`` pieces, forwarded as each one is ready.

The plain ring finishes a whole step (receive the chunk, add it) before the next step's send starts, so each step
pays the chunk's full transfer and then its full addition. Cutting every chunk into pieces lets a rank send piece j
of the next step as soon as piece j of this step is added, while pieces j + 1... are still arriving: transfer and
reduction overlap, and on real links the step's latency is paid once per piece only at the ends of the pipeline
(NCCL cuts its ring into slices the same way). The all-gather half forwards each received piece at once.

Every receive of a step is posted before any of them is waited for; a piece is only sent once the addition that
produced it is done, and a chunk is only overwritten (all-gather) after every send of it has completed.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import chunk_bounds, chunks, rank_world, ring_peers
from workbench import register

PIECES = 3


def _pieces(t: torch.Tensor) -> list[torch.Tensor]:
    """Return t's non-empty pieces (a piece j of a shorter chunk is never longer than piece j of a longer one)."""
    return [t[a:b] for a, b in chunk_bounds(t.shape[0], PIECES) if b > a]


def _wait(handles: list) -> None:
    for h in handles:
        h.wait()
    handles.clear()


@register("all_reduce", "ring_pipelined", backend="torch",
          idea="Ring with each chunk cut in pieces: piece j of the next step is sent as soon as it is reduced, "
               "while later pieces are still in flight.")
def ring_pipelined(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    y = x.clone()
    if world == 1:
        return y
    parts = chunks(y, world)
    right, left = ring_peers(rank, world)
    longest = torch.empty(max(p.shape[0] for p in parts), dtype=y.dtype, device=y.device)
    bufs = [torch.empty_like(p) for p in _pieces(longest)]
    sent: dict[int, list] = {c: [] for c in range(world)}  # sends in flight, per chunk
    sent[rank] = [dist.isend(p, right, group=group) for p in _pieces(parts[rank])]  # reduce-scatter step 0
    for s in range(world - 1):  # reduce-scatter: add each piece as it lands, then forward it
        c = (rank - s - 1) % world
        mine = _pieces(parts[c])
        recvs = [dist.irecv(b[:m.shape[0]], left, group=group) for b, m in zip(bufs, mine, strict=False)]
        for r, b, m in zip(recvs, bufs, mine, strict=False):
            r.wait()
            m += b[:m.shape[0]]
            sent[c].append(dist.isend(m, right, group=group))  # the next step's send (or all-gather step 0's)
    for s in range(world - 1):  # all-gather: receive pieces in place and forward each one as it arrives
        c = (rank - s) % world
        _wait(sent[c])  # a chunk is overwritten only once every send of it has completed
        mine = _pieces(parts[c])
        recvs = [dist.irecv(m, left, group=group) for m in mine]
        for r, m in zip(recvs, mine, strict=True):
            r.wait()
            if s < world - 2:
                sent[c].append(dist.isend(m, right, group=group))
    for c in sent:
        _wait(sent[c])
    return y
