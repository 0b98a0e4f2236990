"""Known-wrong all_reduce kernels: three classic ring mistakes, each caught the same way every time.

- ``wrong_ring_chunk_off_by_one``: the all-gather starts one chunk early, from chunk r, which this rank has only
  partly reduced, instead of chunk r + 1, the one its reduce-scatter completed. Every chunk ends up holding the sum
  over only some of the ranks: ``partial_sum`` (the checker finds each wrong element equal to the sum of a proper
  subset of the ranks' inputs).
- ``wrong_read_before_wait``: the reduce-scatter adds the receive buffer into its chunk before waiting for the
  receive. Whether the message has landed by then is luck; under the checker's fault plans a receive lands only
  at ``wait()``, into a buffer first filled with zeros in one plan and NaN in the other, so the outputs of the two
  plans differ: ``missing_wait``.
- ``wrong_deadlock_order``: every rank does a blocking send to its right neighbour, then a receive from its left
  one. With rendezvous semantics (no buffering: gloo, measured in notebook 08 §6; MPI with large messages) each
  send waits for a receive its neighbour has not posted, around the whole ring: ``deadlock`` within the time
  limit, naming every rank's pending send. World 1 sends nothing and passes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import chunks, rank_world, ring_peers
from kernels.all_reduce.v2_ring import reduce_scatter_ring
from workbench import register


def all_gather_ring_off_by_one(parts: list[torch.Tensor], rank: int, world: int, group: object = None) -> None:
    right, left = ring_peers(rank, world)
    for s in range(world - 1):
        send_c, recv_c = (rank - s) % world, (rank - s - 1) % world  # BUG: one chunk early
        r = dist.irecv(parts[recv_c], left, group=group)
        h = dist.isend(parts[send_c], right, group=group)
        r.wait()
        h.wait()


@register("all_reduce", "wrong_ring_chunk_off_by_one", backend="torch", expected_diagnosis="partial_sum",
          dtypes=("float32",),
          idea="KNOWN WRONG: the ring's all-gather starts from chunk r instead of r+1, forwarding a partly reduced "
               "chunk.")
def wrong_ring_chunk_off_by_one(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    y = x.clone()
    parts = chunks(y, world)
    reduce_scatter_ring(parts, rank, world, group)
    all_gather_ring_off_by_one(parts, rank, world, group)
    return y


def reduce_scatter_read_early(parts: list[torch.Tensor], rank: int, world: int, group: object = None) -> None:
    right, left = ring_peers(rank, world)
    buf = torch.empty(max(p.shape[0] for p in parts), dtype=parts[0].dtype, device=parts[0].device)
    for s in range(world - 1):
        send_c, recv_c = (rank - s) % world, (rank - s - 1) % world
        got = buf[:parts[recv_c].shape[0]]
        r = dist.irecv(got, left, group=group)
        h = dist.isend(parts[send_c], right, group=group)
        parts[recv_c] += got  # BUG: read before r.wait()
        r.wait()
        h.wait()


@register("all_reduce", "wrong_read_before_wait", backend="torch", expected_diagnosis="missing_wait",
          dtypes=("float32",),
          idea="KNOWN WRONG: the ring adds the received chunk before waiting on its irecv handle.")
def wrong_read_before_wait(x: torch.Tensor, group: object = None) -> torch.Tensor:
    from kernels.all_reduce.v2_ring import all_gather_ring

    rank, world = rank_world(group)
    y = x.clone()
    parts = chunks(y, world)
    reduce_scatter_read_early(parts, rank, world, group)
    all_gather_ring(parts, rank, world, group)
    return y


@register("all_reduce", "wrong_deadlock_order", backend="torch", expected_diagnosis="deadlock",
          dtypes=("float32",),
          idea="KNOWN WRONG: a ring step as a blocking send to the right, then a receive from the left.")
def wrong_deadlock_order(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    y = x.clone()
    parts = chunks(y, world)
    right, left = ring_peers(rank, world)
    buf = torch.empty(max(p.shape[0] for p in parts), dtype=y.dtype, device=y.device)
    for s in range(world - 1):
        send_c, recv_c = (rank - s) % world, (rank - s - 1) % world
        got = buf[:parts[recv_c].shape[0]]
        dist.send(parts[send_c], right, group=group)  # BUG: every rank sends first; nobody is receiving yet
        dist.recv(got, left, group=group)
        parts[recv_c] += got
    for s in range(world - 1):
        send_c, recv_c = (rank + 1 - s) % world, (rank - s) % world
        dist.send(parts[send_c], right, group=group)
        dist.recv(parts[recv_c], left, group=group)
    return y
