"""The reduce_scatter contract: ``reduce_scatter(x[N], group) -> [len(chunk r)]``: rank r gets chunk r of the sum.

Every rank calls it with its own ``x`` (same N everywhere). The sum is cut into world chunks in
``torch.tensor_split``'s layout (the first N % world chunks one element longer; a chunk is empty when N < world) and
rank r returns chunk r. It is the first half of a ring all-reduce, and the collective of ZeRO / FSDP gradient
sharding and of sequence-parallel layers.

Cost (nccl-tests): S = N * elem_size, the bytes of one rank's input; a ring moves (n - 1)/n * S through each
link, so busbw = algbw * (n - 1)/n.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import DTYPES, check_shapes, chunk_bounds, rand_vectors, sum_tolerance, validate_vector
from workbench.contracts import elem_size
from workbench.registry import Op, register, register_op


def validate(x: torch.Tensor, group: object = None) -> dict:
    """Check one rank's input and return {world, N}."""
    return validate_vector("reduce_scatter", x, group)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's input: a random [N] vector in [-3, 3], rounded to ``dtype``."""
    return [(x,) for x in rand_vectors(sizes["world"], sizes["N"], dtype, seed, device)]


def full_sum(rank_inputs: list[tuple]) -> torch.Tensor:
    """Return the float64 sum of every rank's x."""
    return torch.stack([x.double() for (x,) in rank_inputs]).sum(0)


def reference(rank_inputs: list[tuple]) -> list[torch.Tensor]:
    """Return each rank's expected output: chunk r of the float64 sum."""
    total = full_sum(rank_inputs)
    return [total[a:b].clone() for a, b in chunk_bounds(total.shape[0], len(rank_inputs))]


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return sum_tolerance(dtype, shape)


def nbytes(world: int, N: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    return N * elem_size(dtype)  # nccl-tests' S: one rank's input


def explain(outs: list, refs: list, rank_inputs: list[tuple], kw: dict, atol: float, rtol: float) -> str | None:
    """Return 'wrong_chunk' when a rank returns another rank's chunk of the sum, 'partial_sum' for subset sums."""
    from workbench.comm_check import other_chunk

    total = full_sum(rank_inputs)
    bounds = chunk_bounds(total.shape[0], len(rank_inputs))
    key = other_chunk(outs, refs, total, bounds, atol, rtol)
    if key is not None:
        return key
    xs = [x.double() for (x,) in rank_inputs]
    if all(o[0].shape == r[0].shape for o, r in zip(outs, refs, strict=True)):
        return _partial(outs, refs, xs, bounds, atol, rtol)
    return None


def _partial(outs: list, refs: list, xs: list[torch.Tensor], bounds: list, atol: float, rtol: float) -> str | None:
    from workbench.comm_check import partial_sums

    for r, (a, b) in enumerate(bounds):
        if partial_sums([outs[r]], [refs[r]], [x[a:b] for x in xs], atol, rtol) is None and \
                not torch.allclose(outs[r][0].double(), refs[r][0], atol=atol, rtol=rtol, equal_nan=True):
            return None
    return "partial_sum"


OP = register_op(Op(
    name="reduce_scatter",
    signature="reduce_scatter(x[N], group) -> [chunk_r]",
    shape_keys=("world", "N"),
    make=make, validate=validate, reference=reference, tolerance=tolerance, explain=explain,
    flops=lambda world, N: (world - 1) * N / world,  # each rank adds n - 1 copies of its own chunk
    bytes=nbytes,
    check_shapes=check_shapes((7, 33)),
    dtypes=DTYPES,
    package="kernels.reduce_scatter.variants",
    bench_shapes={"gpu": [{"world": 8, "N": n} for n in (2**16, 2**22, 2**28)],
                  "quick": [{"world": 4, "N": 2**20}], "cpu": [{"world": 4, "N": 2**16}]},
    size_key=lambda s: s["N"],
    distributed=True,
    doc="Sum a vector over the ranks and leave chunk r of the sum on rank r: half an all-reduce's traffic; "
        "ZeRO/FSDP gradient sharding and sequence parallelism use it.",
))


@register("reduce_scatter", "torch_reduce_scatter", backend="torch",
          idea="torch.distributed's reduce-scatter on the input padded to world equal chunks, then chunk r cut back.")
def torch_reduce_scatter(x: torch.Tensor, group: object = None) -> torch.Tensor:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    bounds = chunk_bounds(x.shape[0], world)
    m = max(b - a for a, b in bounds)
    padded = torch.zeros(world * m, dtype=x.dtype, device=x.device)
    for r, (a, b) in enumerate(bounds):  # torch's collective wants equal chunks: chunk r at [r*m, r*m + len)
        padded[r * m:r * m + b - a] = x[a:b]
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    rs(out, padded, group=group)
    a, b = bounds[rank]
    return out[:b - a].clone()
