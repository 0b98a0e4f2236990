"""reduce_scatter, ring: n - 1 isend/irecv steps; each rank adds what arrives into its copy and forwards it.

Step s: rank r sends chunk (r - s - 1) to its right neighbour and adds the chunk (r - s - 2) it receives from its
left one. The chunk a rank receives last, at step n - 2, is (r - n) = r: its own, now summed over all n ranks. (The
all-reduce's ring starts one chunk later and ends owning chunk r + 1; here the indices are shifted so each rank
ends with the chunk the contract gives it.) Each rank sends (n - 1) chunks of S / n.
"""

from __future__ import annotations

import torch

from kernels._comm import chunks, exchange, rank_world, ring_peers
from workbench import register


@register("reduce_scatter", "ring", backend="torch",
          idea="Ring: n-1 steps, each sending one chunk right and adding the chunk from the left; rank r ends "
               "owning chunk r.")
def ring(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    parts = chunks(x.clone(), world)
    right, left = ring_peers(rank, world)
    buf = torch.empty(max(p.shape[0] for p in parts), dtype=x.dtype, device=x.device)
    for s in range(world - 1):
        send_c, recv_c = (rank - s - 1) % world, (rank - s - 2) % world
        got = buf[:parts[recv_c].shape[0]]
        exchange(parts[send_c], right, got, left, group)
        parts[recv_c] += got
    return parts[rank].clone()
