"""The all_reduce contract: ``all_reduce(x[N], group) -> [N]``, the elementwise sum over the ranks of ``group``.

Every rank calls it with its own ``x`` (same N everywhere) and gets the same sum; ``x`` is not changed. A
distributed op (``Op.distributed``): ``make`` returns each rank's inputs, ``reference`` each rank's expected output
(the float64 sum), and the checker runs the variant on ranks of a fresh process group at world sizes 1 to 5 with
lengths that do not divide by the world (:mod:`workbench.comm_check`).

Cost, as nccl-tests counts it: the message size S = N * elem_size; algbw = S / t; a ring moves 2 (n - 1) / n * S
through each rank's link (a reduce-scatter then an all-gather, n - 1 steps of S / n each), so busbw = algbw *
2 (n - 1) / n, the number to hold against a link's bandwidth.

Tolerance: the sum's order is the algorithm's (a ring adds in rank order around the ring, a tree pairwise), each of
the world - 1 additions rounding once in the input dtype (NCCL and gloo also store each partial sum in the input
dtype, so a ring's fp16 result differs from a tree's in the last bits).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels._comm import DTYPES, check_shapes, rand_vectors, sum_tolerance, validate_vector
from workbench.contracts import elem_size
from workbench.registry import Op, register, register_op


def validate(x: torch.Tensor, group: object = None) -> dict:
    """Check one rank's input and return {world, N}."""
    return validate_vector("all_reduce", x, group)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's input: a random [N] vector in [-3, 3], rounded to ``dtype``."""
    return [(x,) for x in rand_vectors(sizes["world"], sizes["N"], dtype, seed, device)]


def reference(rank_inputs: list[tuple]) -> list[torch.Tensor]:
    """Return each rank's expected output: the float64 sum of every rank's x."""
    total = torch.stack([x.double() for (x,) in rank_inputs]).sum(0)
    return [total.clone() for _ in rank_inputs]


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return sum_tolerance(dtype, shape)


def nbytes(world: int, N: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    # nccl-tests' size S: the bytes of one rank's vector (busbw scales it by 2(n-1)/n).
    return N * elem_size(dtype)


def explain(outs: list, refs: list, rank_inputs: list[tuple], kw: dict, atol: float, rtol: float) -> str | None:
    """Return 'partial_sum' when every wrong element is the sum over some but not all ranks."""
    from workbench.comm_check import partial_sums

    return partial_sums(outs, refs, [x for (x,) in rank_inputs], atol, rtol)


OP = register_op(Op(
    name="all_reduce",
    signature="all_reduce(x[N], group) -> [N]",
    shape_keys=("world", "N"),
    make=make, validate=validate, reference=reference, tolerance=tolerance, explain=explain,
    flops=lambda world, N: (world - 1) * N,  # one addition per element per other rank's contribution
    bytes=nbytes,
    check_shapes=check_shapes((7, 33)),
    dtypes=DTYPES,
    package="kernels.all_reduce.variants",
    bench_shapes={"gpu": [{"world": 8, "N": n} for n in (2**16, 2**22, 2**28)],
                  "quick": [{"world": 4, "N": 2**20}], "cpu": [{"world": 4, "N": 2**16}]},
    size_key=lambda s: s["N"],
    distributed=True,
    doc="Sum a vector over the ranks, every rank getting the result: the collective of data-parallel gradient "
        "sync and of tensor parallelism's row-parallel layers; bandwidth-bound for large N, latency-bound for small.",
))


@register("all_reduce", "torch_all_reduce", backend="torch",
          idea="torch.distributed.all_reduce: the backend's own algorithm (gloo's here, NCCL's ring or tree on GPUs).")
def torch_all_reduce(x: torch.Tensor, group: object = None) -> torch.Tensor:
    y = x.clone()
    dist.all_reduce(y, group=group)
    return y
