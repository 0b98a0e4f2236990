"""What every ring variant shares: this rank's place in the group and its neighbours' global ranks."""

from __future__ import annotations

import torch.distributed as dist


def place(group: object = None) -> tuple[int, int, int, int]:
    """Return (rank, world, right, left): this rank in ``group`` and the global ranks of its ring neighbours.

    The ring sends to the right (rank + 1) and receives from the left (rank - 1), modulo the world; point-to-point
    calls name peers by global rank, hence the translation for a subgroup.
    """
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    right, left = (rank + 1) % world, (rank - 1) % world
    if group is not None:
        right, left = dist.get_global_rank(group, right), dist.get_global_rank(group, left)
    return rank, world, right, left


def call_variant(rank: int, world: int, device: object, op: str, name: str, rank_inputs: list, kw: dict) -> object:
    """Rank function for ``workbench.comm.run``: call the registered variant ``op/name`` with this rank's inputs."""
    import importlib

    from workbench.registry import variant

    importlib.import_module(f"kernels.{op}")  # registers the op's contract in this rank
    inputs = tuple(t.to(device) if hasattr(t, "to") else t for t in rank_inputs[rank])
    return variant(op, name)(*inputs, None, **kw)
