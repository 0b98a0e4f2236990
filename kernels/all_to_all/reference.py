"""The all_to_all contract: ``all_to_all(x[S, d], splits[world], group) -> (y[R, d], recv_splits[world] int64)``.

Rank r's rows are cut into world consecutive blocks of ``splits[j]`` rows (splits: int64 [world], summing to S;
blocks may be empty); block j goes to rank j. Rank r returns the blocks it received, in sender order, and how
many rows each sender sent (``recv_splits[j]`` = rank j's ``splits[r]``). Rank r's own block stays home. This is
MoE dispatch (kernels/moe/ep.py): a rank cannot know in advance how many rows each other rank routes to it, so the
counts travel first.

Cost (nccl-tests): S = the bytes one rank sends (its whole x); (n - 1)/n of it leaves the rank with uniform
splits, busbw = algbw * (n - 1)/n.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import DTYPES, WORLDS
from workbench.contracts import elem_size, require
from workbench.registry import Op, OpError, empty, register, register_op


def validate(x: torch.Tensor, splits: torch.Tensor, group: object = None) -> dict:
    """Check one rank's rows and splits and return {world, T, d}."""
    if not isinstance(x, torch.Tensor) or not isinstance(splits, torch.Tensor):
        raise OpError("all_to_all: x and splits must be torch tensors (splits: int64 [world])")
    require("all_to_all", x.dim() == 2, f"x must be 2-D [S, d], got shape {list(x.shape)}")
    require("all_to_all", x.dtype in DTYPES, f"x must be float32, float16 or bfloat16, got {x.dtype}")
    world = dist.get_world_size(group) if dist.is_initialized() else splits.numel()
    require("all_to_all", splits.dtype == torch.int64 and tuple(splits.shape) == (world,),
            f"splits must be int64 [world] = [{world}], got {splits.dtype} {list(splits.shape)}")
    require("all_to_all", bool((splits >= 0).all()) and int(splits.sum()) == x.shape[0],
            f"splits must be >= 0 and sum to S = {x.shape[0]}, got {splits.tolist()}")
    return {"world": world, "T": x.shape[0], "d": x.shape[1]}


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's (x[S_r, d], splits): about T rows per rank, split unevenly (some blocks empty)."""
    world, t, d = sizes["world"], sizes["T"], sizes["d"]
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(world):
        s = int(torch.randint(0, 2 * t + 1, (1,), generator=g))
        # Uneven splits: each row picks a destination with skewed odds, so blocks differ and some are empty.
        odds = torch.rand(world, generator=g) ** 3 + 1e-3
        dest = torch.multinomial(odds, s, replacement=True, generator=g) if s else torch.zeros(0, dtype=torch.int64)
        splits = torch.bincount(dest, minlength=world).to(torch.int64)
        x = torch.randn(s, d, generator=g).to(dtype)
        out.append((x.to(device), splits))
    return out


def reference(rank_inputs: list[tuple]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return each rank's expected (y, recv_splits): the blocks addressed to it in sender order, in float64."""
    world = len(rank_inputs)
    blocks = [list(torch.split(x.double(), splits.tolist())) for x, splits in rank_inputs]
    out = []
    for r in range(world):
        y = torch.cat([blocks[src][r] for src in range(world)])
        counts = torch.tensor([int(rank_inputs[src][1][r]) for src in range(world)], dtype=torch.int64)
        out.append((y, counts))
    return out


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return 0.0, 0.0  # copies only


def nbytes(world: int, T: int, d: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    return T * d * elem_size(dtype)  # about what one rank sends


OP = register_op(Op(
    name="all_to_all",
    signature="all_to_all(x[S,d], splits[world], group) -> (y[R,d], recv_splits[world])",
    shape_keys=("world", "T", "d"),
    make=make, validate=validate, reference=reference, tolerance=tolerance,
    flops=lambda world, T, d: 0,
    bytes=nbytes,
    check_shapes=[{"world": w, "T": t, "d": d} for w in WORLDS for t, d in ((1, 3), (6, 5))],
    dtypes=DTYPES,
    outputs=("y", "recv_splits"),
    out_dtypes=lambda dt: (dt, torch.int64),
    package="kernels.all_to_all.variants",
    bench_shapes={"gpu": [{"world": 8, "T": t, "d": 4096} for t in (64, 4096)],
                  "quick": [{"world": 4, "T": 1024, "d": 1024}], "cpu": [{"world": 4, "T": 256, "d": 64}]},
    size_key=lambda s: s["T"] * s["d"],
    distributed=True,
    doc="Send block j of each rank's rows to rank j with uneven splits: MoE dispatch and combine (expert "
        "parallelism), Ulysses sequence parallelism; the counts go first.",
))


@register("all_to_all", "torch_all_to_all", backend="torch",
          idea="torch.distributed.all_to_all_single twice: the int64 counts first, then the rows with both splits.")
def torch_all_to_all(x: torch.Tensor, splits: torch.Tensor, group: object = None) -> tuple[torch.Tensor, torch.Tensor]:
    recv = torch.empty_like(splits)
    dist.all_to_all_single(recv, splits, group=group)
    y = empty((int(recv.sum()), x.shape[1]), x.dtype, x.device)
    dist.all_to_all_single(y, x.contiguous(), recv.tolist(), splits.tolist(), group=group)
    return y, recv
