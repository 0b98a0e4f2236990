"""Known-wrong reduce_scatter: the all-reduce's ring indices, so each rank returns the chunk it completed, not its own.

``wrong_returns_next_chunk`` runs the reduce-scatter half of the all-reduce ring (send chunk r - s, add chunk
r - s - 1). That ring ends with chunk r + 1 fully summed on rank r, which is what an all-reduce wants next (its
all-gather starts from there), but the reduce-scatter contract gives rank r chunk r. The kernel returns chunk r + 1.
Every value is a correct sum, of another rank's chunk; with ragged chunks the shape is off too. The checker finds
each rank's output equal to another chunk of the sum and says ``wrong_chunk``. World 1 (one chunk) passes.
"""

from __future__ import annotations

import torch

from kernels._comm import chunks, exchange, rank_world, ring_peers
from workbench import register


@register("reduce_scatter", "wrong_returns_next_chunk", backend="torch", expected_diagnosis="wrong_chunk",
          dtypes=("float32",),
          idea="KNOWN WRONG: the all-reduce's reduce-scatter indices; rank r returns chunk r+1, the one it completed.")
def wrong_returns_next_chunk(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    parts = chunks(x.clone(), world)
    right, left = ring_peers(rank, world)
    buf = torch.empty(max(p.shape[0] for p in parts), dtype=x.dtype, device=x.device)
    for s in range(world - 1):
        send_c, recv_c = (rank - s) % world, (rank - s - 1) % world  # BUG: ends owning chunk rank + 1
        got = buf[:parts[recv_c].shape[0]]
        exchange(parts[send_c], right, got, left, group)
        parts[recv_c] += got
    return parts[(rank + 1) % world].clone()
