"""all_reduce, ring: a reduce-scatter then an all-gather around the ring, n - 1 steps each, with isend/irecv.

The vector is cut into n chunks (tensor_split's layout). Reduce-scatter step s: rank r sends chunk (r - s) to its
right neighbour and adds the chunk (r - s - 1) it receives from its left one into its own copy; after n - 1 steps
rank r holds the full sum of chunk (r + 1) mod n. All-gather step s: rank r sends chunk (r + 1 - s), the one it
completed or received last, and overwrites chunk (r - s) with what arrives. Each rank sends 2 (n - 1) chunks of
S / n: busbw = algbw * 2(n-1)/n stays the link bandwidth whatever n (the ring is bandwidth-optimal).
"""

from __future__ import annotations

import torch

from kernels._comm import chunks, exchange, rank_world, ring_peers
from workbench import register


def reduce_scatter_ring(parts: list[torch.Tensor], rank: int, world: int, group: object = None) -> None:
    """Run the ring's reduce-scatter in place on ``parts``: afterwards chunk (rank + 1) % world holds the full sum."""
    right, left = ring_peers(rank, world)
    buf = torch.empty(max(p.shape[0] for p in parts), dtype=parts[0].dtype, device=parts[0].device)
    for s in range(world - 1):
        send_c, recv_c = (rank - s) % world, (rank - s - 1) % world
        got = buf[:parts[recv_c].shape[0]]
        exchange(parts[send_c], right, got, left, group)
        parts[recv_c] += got


def all_gather_ring(parts: list[torch.Tensor], rank: int, world: int, group: object = None) -> None:
    """Run the ring's all-gather in place on ``parts``, starting from the full chunk (rank + 1) % world."""
    right, left = ring_peers(rank, world)
    for s in range(world - 1):
        send_c, recv_c = (rank + 1 - s) % world, (rank - s) % world
        exchange(parts[send_c], right, parts[recv_c], left, group)


@register("all_reduce", "ring", backend="torch",
          idea="Ring: reduce-scatter then all-gather, n-1 isend/irecv steps each; every link carries 2(n-1)/n of "
               "the vector.")
def ring(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    y = x.clone()
    parts = chunks(y, world)
    reduce_scatter_ring(parts, rank, world, group)
    all_gather_ring(parts, rank, world, group)
    return y
