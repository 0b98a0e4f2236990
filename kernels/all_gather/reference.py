"""The all_gather contract: ``all_gather(x[n_r], group) -> [sum of n_r]``: every rank's piece, in rank order.

Rank r holds a piece of n_r elements; the pieces may differ in length (the checker uses ``torch.tensor_split``'s
layout of N, so some are one longer and some empty when N < world), and a rank does not know the others' lengths
in advance: a variant exchanges them first. Every rank returns the same concatenation. The second half of a ring
all-reduce, and FSDP's weight gather before each layer.

Cost (nccl-tests): S = the bytes of the gathered output; each link carries (n - 1)/n * S on a ring, so busbw =
algbw * (n - 1)/n.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import DTYPES, check_shapes, chunk_bounds, rand_vectors, validate_vector
from workbench.contracts import elem_size
from workbench.registry import Op, register, register_op


def validate(x: torch.Tensor, group: object = None) -> dict:
    """Check one rank's piece and return {world, n}."""
    shape = validate_vector("all_gather", x, group)
    return {"world": shape["world"], "n": shape["N"]}


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's piece: chunk r of a random [N] vector (tensor_split's lengths), rounded to ``dtype``."""
    lens = [b - a for a, b in chunk_bounds(sizes["N"], sizes["world"])]
    return [(x,) for x in rand_vectors(sizes["world"], lens, dtype, seed, device)]


def reference(rank_inputs: list[tuple]) -> list[torch.Tensor]:
    """Return each rank's expected output: every piece, in rank order, in float64."""
    full = torch.cat([x.double() for (x,) in rank_inputs])
    return [full.clone() for _ in rank_inputs]


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return 0.0, 0.0  # copies only: every bit arrives as sent


def nbytes(world: int, N: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    return N * elem_size(dtype)  # nccl-tests' S for all-gather: the gathered output


OP = register_op(Op(
    name="all_gather",
    signature="all_gather(x[n_r], group) -> [N]",
    shape_keys=("world", "N"),
    make=make, validate=validate, reference=reference, tolerance=tolerance,
    flops=lambda world, N: 0,
    bytes=nbytes,
    check_shapes=check_shapes((7, 33)),
    dtypes=DTYPES,
    package="kernels.all_gather.variants",
    bench_shapes={"gpu": [{"world": 8, "N": n} for n in (2**16, 2**22, 2**28)],
                  "quick": [{"world": 4, "N": 2**20}], "cpu": [{"world": 4, "N": 2**16}]},
    size_key=lambda s: s["N"],
    distributed=True,
    doc="Give every rank the concatenation of every rank's piece: FSDP's weight gather, tensor parallelism's "
        "sequence gather; moves bits, computes nothing.",
))


def piece_lengths(n: int, group: object = None, device: torch.device | None = None) -> list[int]:
    """Return every rank's piece length (one tiny all_gather of an int64 per rank, on ``device``: NCCL's GPU)."""
    world = dist.get_world_size(group)
    lens = torch.empty(world, dtype=torch.int64, device=device)
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    ag(lens, torch.tensor([n], dtype=torch.int64, device=device), group=group)
    return lens.tolist()


@register("all_gather", "torch_all_gather", backend="torch",
          idea="torch.distributed's all-gather on pieces padded to the longest, after gathering the lengths; "
               "padding cut away.")
def torch_all_gather(x: torch.Tensor, group: object = None) -> torch.Tensor:
    world = dist.get_world_size(group)
    lens = piece_lengths(x.shape[0], group, x.device)
    m = max(lens)
    mine = torch.zeros(m, dtype=x.dtype, device=x.device)
    mine[:x.shape[0]] = x
    out = torch.empty(world * m, dtype=x.dtype, device=x.device)
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    ag(out, mine, group=group)
    return torch.cat([out[r * m:r * m + n] for r, n in enumerate(lens)])
