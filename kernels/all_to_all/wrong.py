"""Known-wrong all_to_all: every block staged in one send buffer that is refilled before the previous send's wait.

``wrong_reused_buffer`` posts all its sends first (a fine idea: no step waits on the previous one), but copies each
block into the same staging buffer and waits on the sends only at the end. A transport may read a send buffer any
time until ``wait()`` returns, so a message can carry a later block. Under the checker's ``late`` plan a send reads
its buffer when the rank next blocks, under ``prompt`` at the call, so the plans' outputs differ: ``missing_wait``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import rank_world
from kernels.all_to_all.v1_pairwise import exchange_counts
from workbench import register


@register("all_to_all", "wrong_reused_buffer", backend="torch", expected_diagnosis="missing_wait",
          dtypes=("float32",),
          idea="KNOWN WRONG: all sends posted at once from one staging buffer, refilled before each send's wait.")
def wrong_reused_buffer(x: torch.Tensor, splits: torch.Tensor, group: object = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world = rank_world(group)
    recv = exchange_counts(splits, rank, world, group)
    send_off = [0] + torch.cumsum(splits, 0).tolist()
    recv_off = [0] + torch.cumsum(recv, 0).tolist()
    y = torch.empty((recv_off[-1], x.shape[1]), dtype=x.dtype, device=x.device)
    y[recv_off[rank]:recv_off[rank + 1]] = x[send_off[rank]:send_off[rank + 1]]
    stage = torch.empty((int(splits.max()) if world else 0, x.shape[1]), dtype=x.dtype, device=x.device)
    handles = []
    for k in range(1, world):
        dst, src = (rank + k) % world, (rank - k) % world
        handles.append(dist.irecv(y[recv_off[src]:recv_off[src + 1]], src, group=group))
        n = int(splits[dst])
        stage[:n] = x[send_off[dst]:send_off[dst + 1]]  # BUG: the previous isend may still be reading stage
        handles.append(dist.isend(stage[:n], dst, group=group))
    for h in handles:
        h.wait()
    return y, recv
