"""all_reduce, recursive halving-doubling (Rabenseifner): log2(n) exchange steps each way instead of the ring's n - 1.

Among p = 2^k ranks: halving (a reduce-scatter): at distance d = p/2, p/4, ..., 1 each rank swaps halves of its
current segment with the partner at ``vrank XOR d``, keeps the half its bit chooses and adds the partner's copy of
it; after k steps each rank owns 1/p of the vector, fully summed. Doubling (an all-gather) undoes the steps in
reverse, each rank sending its segment and receiving the partner's. Each rank sends (p - 1)/p * S per phase, the
ring's volume, in log2(p) messages instead of p - 1: fewer latencies, so it wins on small and medium messages.

A world that is not a power of two folds its extra ranks first (the standard pre/post step): with rem = n - p,
ranks 0..2rem-1 pair up, each even rank sends its whole vector to the odd one above it and sits out; the p ranks left
run the algorithm; at the end each odd rank of a pair sends the result back to its even partner.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import exchange, rank_world
from workbench import register


def _fold(rank: int, world: int) -> tuple[int, int, int]:
    """Return (p, rem, vrank): the power of two below world, the extra ranks, this rank's place (-1: sits out)."""
    p = 1 << (world.bit_length() - 1)
    rem = world - p
    if rank < 2 * rem:
        return p, rem, rank // 2 if rank % 2 else -1
    return p, rem, rank - rem


def _real(vrank: int, rem: int) -> int:
    """Return the real rank of virtual rank ``vrank``."""
    return 2 * vrank + 1 if vrank < rem else vrank + rem


def _halving(y: torch.Tensor, vrank: int, p: int, rem: int, group: object) -> list[tuple[int, int, int]]:
    """Reduce-scatter by recursive halving; return the steps as (partner, lo, hi) of the segment kept."""
    lo, hi, steps = 0, y.shape[0], []
    buf = torch.empty_like(y)
    d = p // 2
    while d >= 1:
        partner = vrank ^ d
        mid = lo + (hi - lo) // 2
        keep, give = ((lo, mid), (mid, hi)) if vrank & d == 0 else ((mid, hi), (lo, mid))
        got = buf[:keep[1] - keep[0]]
        exchange(y[give[0]:give[1]], _real(partner, rem), got, _real(partner, rem), group)
        y[keep[0]:keep[1]] += got
        steps.append((partner, lo, hi))
        lo, hi = keep
        d //= 2
    return steps


def _doubling(y: torch.Tensor, vrank: int, rem: int, steps: list[tuple[int, int, int]], group: object) -> None:
    """All-gather by recursive doubling: replay the halving's steps backwards, swapping the owned halves."""
    for partner, lo, hi in reversed(steps):
        mid = lo + (hi - lo) // 2
        d = vrank ^ partner
        mine, theirs = ((lo, mid), (mid, hi)) if vrank & d == 0 else ((mid, hi), (lo, mid))
        exchange(y[mine[0]:mine[1]], _real(partner, rem), y[theirs[0]:theirs[1]], _real(partner, rem), group)


@register("all_reduce", "halving_doubling", backend="torch",
          idea="Recursive halving reduce-scatter then recursive doubling all-gather: 2 log2(p) steps; extra ranks "
               "of a non-power-of-two world fold into their neighbours first.")
def halving_doubling(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    y = x.clone()
    p, rem, vrank = _fold(rank, world)
    if rank < 2 * rem:  # pre-step: even ranks hand their vector to the odd rank above
        if vrank < 0:
            dist.send(y, rank + 1, group=group)
            dist.recv(y, rank + 1, group=group)  # post-step: the result comes back
            return y
        buf = torch.empty_like(y)
        dist.recv(buf, rank - 1, group=group)
        y += buf
    steps = _halving(y, vrank, p, rem, group)
    _doubling(y, vrank, rem, steps, group)
    if rank < 2 * rem:
        dist.send(y, rank - 1, group=group)
    return y
