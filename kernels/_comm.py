"""Helpers the communication kernels share: the chunk layout, ring neighbours, one exchange step, the contracts' parts.

Chunks follow ``torch.tensor_split``: N elements over ``world`` ranks, the first ``N % world`` chunks one element
longer (a rank may own an empty chunk when N < world). Rank r of a reduce-scatter owns chunk r.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from workbench.contracts import require
from workbench.registry import OpError

#: World sizes every communication op is checked at: odd sizes catch ring index bugs, 1 catches "no peer at all".
WORLDS = (1, 2, 3, 4, 5)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def chunk_bounds(n: int, world: int) -> list[tuple[int, int]]:
    """Return the [start, end) of each rank's chunk of n elements (tensor_split's layout)."""
    base, extra = divmod(n, world)
    out, start = [], 0
    for r in range(world):
        end = start + base + (1 if r < extra else 0)
        out.append((start, end))
        start = end
    return out


def chunks(x: torch.Tensor, world: int) -> list[torch.Tensor]:
    """Return views of x's world chunks (tensor_split along dim 0)."""
    return [x[a:b] for a, b in chunk_bounds(x.shape[0], world)]


def rank_world(group: Any = None) -> tuple[int, int]:
    """Return (rank, world) in ``group`` (the default group when None)."""
    return dist.get_rank(group), dist.get_world_size(group)


def ring_peers(rank: int, world: int) -> tuple[int, int]:
    """Return (right, left): the rank this one sends to and the rank it receives from around the ring."""
    return (rank + 1) % world, (rank - 1) % world


def exchange(send: torch.Tensor, dst: int, recv: torch.Tensor, src: int, group: Any = None) -> None:
    """Send ``send`` to ``dst`` while receiving ``recv`` from ``src``; return once both are complete.

    The receive is posted first and both are asynchronous: with blocking calls every rank of a ring would sit in
    its send waiting for a receive that its neighbour has not posted yet.
    """
    r = dist.irecv(recv, src, group=group)
    s = dist.isend(send, dst, group=group)
    r.wait()
    s.wait()


def validate_vector(op: str, x: Any, group: Any = None) -> dict:
    """Check one rank's 1-D float input of a reduction op and return {"N": len, "world": world}."""
    if not isinstance(x, torch.Tensor):
        raise OpError(f"{op}: x must be a torch.Tensor, got {type(x).__name__}")
    require(op, x.dim() == 1, f"x must be 1-D [N], got shape {list(x.shape)}")
    require(op, x.dtype in DTYPES + (torch.float64,), f"x must be float32, float16 or bfloat16, got {x.dtype}")
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    return {"world": world, "N": x.shape[0]}


def rand_vectors(world: int, n: int | list[int], dtype: torch.dtype, seed: int, device: torch.device) -> list:
    """Return one random vector per rank (lengths ``n``, or n[r] each), values rounded to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    lens = n if isinstance(n, list) else [n] * world
    return [torch.randn(m, generator=g).clamp_(-3, 3).to(dtype).to(device) for m in lens]


def sum_tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    """Return (atol, rtol) of a sum over ``world`` ranks: each of the world - 1 additions rounds once in ``dtype``.

    Inputs are in [-3, 3], so a partial sum is at most 15 in magnitude; one rounding costs up to half an ulp of it.
    """
    eps = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float64: 2.0**-53}[dtype]
    adds = max(1, int(shape.get("world", 1)) - 1)
    return adds * eps * 16.0, 2 * eps


def check_shapes(ns: tuple[int, ...]) -> list[dict]:
    """Return check shapes: every world of WORLDS with each length in ``ns`` plus one shorter than the world."""
    out = []
    for w in WORLDS:
        for n in dict.fromkeys((*ns, max(1, w - 1))):
            out.append({"world": w, "N": n})
    return out
