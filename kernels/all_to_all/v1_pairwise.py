"""all_to_all, pairwise exchange: n - 1 steps; at step k rank r sends to r + k and receives from r - k.

Every step pairs each rank with one sender and one receiver, so no link carries two messages at once and every
rank sends and receives in each step (the schedule MPI libraries use for large all-to-alls). The counts go first,
by the same schedule, so each receive knows its size; the block for the rank itself is copied.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import rank_world
from workbench import empty, register


def exchange_counts(splits: torch.Tensor, rank: int, world: int, group: object = None) -> torch.Tensor:
    """Return recv_splits: step k sends splits[r + k] to rank r + k and receives rank r - k's count for r."""
    recv = torch.empty_like(splits)
    recv[rank] = splits[rank]
    for k in range(1, world):
        dst, src = (rank + k) % world, (rank - k) % world
        r = dist.irecv(recv[src:src + 1], src, group=group)
        s = dist.isend(splits[dst:dst + 1].clone(), dst, group=group)
        r.wait()
        s.wait()
    return recv


@register("all_to_all", "pairwise", backend="torch",
          idea="Pairwise exchange: n-1 steps, step k sending to rank r+k and receiving from r-k; counts first.")
def pairwise(x: torch.Tensor, splits: torch.Tensor, group: object = None) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world = rank_world(group)
    recv = exchange_counts(splits, rank, world, group)
    send_off = [0] + torch.cumsum(splits, 0).tolist()
    recv_off = [0] + torch.cumsum(recv, 0).tolist()
    y = empty((recv_off[-1], x.shape[1]), x.dtype, x.device)
    y[recv_off[rank]:recv_off[rank + 1]] = x[send_off[rank]:send_off[rank + 1]]
    for k in range(1, world):
        dst, src = (rank + k) % world, (rank - k) % world
        r = dist.irecv(y[recv_off[src]:recv_off[src + 1]], src, group=group)
        s = dist.isend(x[send_off[dst]:send_off[dst + 1]].contiguous(), dst, group=group)
        r.wait()
        s.wait()
    return y, recv
