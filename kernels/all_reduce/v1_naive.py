"""all_reduce, naive: every rank sends its vector to rank 0, which adds them up and sends the sum back to each.

Rank 0's link carries (n - 1) * S in and (n - 1) * S out while the other links idle: the time grows with the world
size however fast each link is, busbw = algbw * 2(n-1)/n falls like 1/n.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import rank_world
from workbench import register


@register("all_reduce", "naive", backend="torch",
          idea="Reduce to rank 0 with blocking send/recv, then rank 0 sends the sum to each rank: rank 0's link "
               "carries 2(n-1) messages.")
def naive(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    total = x.clone()
    if rank == 0:
        buf = torch.empty_like(x)
        for src in range(1, world):  # in rank order: each send below is matched by exactly one of these
            dist.recv(buf, src, group=group)
            total += buf
        for dst in range(1, world):
            dist.send(total, dst, group=group)
    elif world > 1:
        dist.send(x, 0, group=group)
        dist.recv(total, 0, group=group)
    return total
