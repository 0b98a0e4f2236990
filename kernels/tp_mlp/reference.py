"""The tp_mlp contract: a transformer MLP split across ranks the Megatron way, with one all-reduce.

``tp_mlp(x[T,H], w1_shard[H,F_r], w2_shard[F_r,H], group) -> [T,H]``, called on every rank with its own shards.

* The dense MLP is ``y = gelu_tanh(x @ w1) @ w2`` with ``w1[H, F]``, ``w2[F, H]`` and GELU's tanh form
  (``0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))``, GPT-2's and Megatron's ``gelu``; ``torch``'s
  ``gelu(approximate="tanh")``). No biases.
* Rank ``r`` holds the same ``x`` (the activations every rank has after the previous layer's all-reduce), the
  columns ``F_r`` of ``w1`` and the same rows of ``w2``: the F hidden features cut as ``torch.tensor_split(F,
  world)`` does (the first ``F % world`` ranks one feature more). Column-parallel first GEMM: rank r computes
  its own hidden features ``h_r = gelu(x @ w1_shard)`` with no communication, since the activation acts on each
  feature alone. Row-parallel second GEMM: ``h_r @ w2_shard`` is rank r's *partial sum* of y over its features;
  **one all-reduce** adds the partials, and every rank returns the whole ``y``.
* x, w1_shard and w2_shard share one dtype (fp32, fp16, bf16), which the output has.

Why this split: any other order needs a second collective (a row-split first GEMM must all-reduce before the
non-linear GELU, since gelu(a + b) != gelu(a) + gelu(b)). The all-reduce moves ``T * H`` elements per layer
whatever ``F``: :func:`workbench.comm_model.tp_allreduce_vs_gemm` prices it against the GEMM it follows.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from workbench import comm
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "tp_mlp"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def gelu_tanh(a: torch.Tensor) -> torch.Tensor:
    """Return GELU's tanh approximation of ``a`` (torch's ``gelu(approximate="tanh")``)."""
    return torch.nn.functional.gelu(a, approximate="tanh")


def validate(x: torch.Tensor, w1_shard: torch.Tensor, w2_shard: torch.Tensor, group: object = None) -> dict:
    """Check one rank's inputs of tp_mlp and return its shape {T, H, F_r}."""
    require_tensor(OP_NAME, "x", x, 2, DTYPES, "[T,H]")
    require_tensor(OP_NAME, "w1_shard", w1_shard, 2, DTYPES, "[H,F_r]")
    require_tensor(OP_NAME, "w2_shard", w2_shard, 2, DTYPES, "[F_r,H]")
    require_same_dtype(OP_NAME, x=x, w1_shard=w1_shard, w2_shard=w2_shard)
    t, h = x.shape
    require(OP_NAME, w1_shard.shape[0] == h, f"w1_shard[H,F_r] must have x's H = {h} rows, got "
            f"{tuple(w1_shard.shape)}")
    require(OP_NAME, tuple(w2_shard.shape) == (w1_shard.shape[1], h),
            f"w2_shard must be [F_r, H] = [{w1_shard.shape[1]}, {h}] (this rank's rows of w2: the same hidden "
            f"features as w1_shard's columns), got {tuple(w2_shard.shape)}")
    return {"T": t, "H": h, "F_r": w1_shard.shape[1]}


def dense(rank_inputs: list[tuple]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (x, w1, w2) of the dense MLP in float64: every rank's shards put back together in rank order."""
    x = rank_inputs[0][0].double().cpu()
    w1 = torch.cat([r[1].double().cpu() for r in rank_inputs], dim=1)
    w2 = torch.cat([r[2].double().cpu() for r in rank_inputs], dim=0)
    return x, w1, w2


def reference(rank_inputs: list[tuple]) -> list[torch.Tensor]:
    """Return the dense MLP ``gelu_tanh(x @ w1) @ w2`` in float64, the same for every rank."""
    x, w1, w2 = dense(rank_inputs)
    y = gelu_tanh(x @ w1) @ w2
    return [y.clone() for _ in rank_inputs]


def partials(rank_inputs: list[tuple]) -> list[torch.Tensor]:
    """Return each rank's float64 partial sum ``gelu(x @ w1_shard) @ w2_shard`` (before the all-reduce)."""
    return [gelu_tanh(x.double() @ w1.double()) @ w2.double() for x, w1, w2 in rank_inputs]


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's (x, w1_shard, w2_shard): one x for all, w1's columns and w2's rows cut by tensor_split."""
    g = torch.Generator().manual_seed(seed)
    world, t, h, f = (sizes[k] for k in ("world", "T", "H", "F"))
    cpu = torch.device("cpu")
    x = randn((t, h), torch.float32, g, cpu)
    w1 = randn((h, f), torch.float32, g, cpu, scale=h ** -0.5)  # pre-activations of unit size
    w2 = randn((f, h), torch.float32, g, cpu, scale=f ** -0.5)
    cols = torch.tensor_split(torch.arange(f), world)
    return [(x.to(dtype).to(device), w1[:, c].contiguous().to(dtype).to(device),
             w2[c, :].contiguous().to(dtype).to(device)) for c in cols]


def flops(world: int, T: int, H: int, F: int) -> float:  # noqa: N803
    return 4.0 * T * H * F  # two GEMMs of 2*T*H*F FLOPs, split over the ranks


def nbytes(world: int, T: int, H: int, F: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    # the weights once (split over the ranks), x read and y written by every rank
    return (2 * H * F + 2 * world * T * H) * elem_size(dtype)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (1e-4, 1e-4), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}[dtype]


def explain(outs: list, refs: list, inputs: list, kw: dict, atol: float, rtol: float) -> str | None:
    """Name the classic mistake: each rank returns its own partial sum, the all-reduce missing (partial_sum)."""
    from workbench.checker import close_to

    outs = [o[0] if isinstance(o, (list, tuple)) else o for o in outs]  # each rank's one output
    parts = partials(inputs)
    if len(outs) == len(parts) > 1 and all(close_to(o, p.to(o.dtype), atol, rtol) for o, p in zip(outs, parts,
                                                                                                  strict=True)):
        return "partial_sum"
    return None


def _shape(world: int, t: int, h: int, f: int) -> dict:
    return {"world": world, "T": t, "H": h, "F": f}


# F % world != 0 at worlds 3 and 4 (ragged shards); T = 1 (one decode token)
CHECK_SHAPES = [_shape(1, 3, 8, 16), _shape(2, 5, 16, 64), _shape(3, 1, 8, 20), _shape(4, 7, 16, 30)]

OP = register_op(Op(
    name=OP_NAME,
    signature="tp_mlp(x[T,H], w1_shard[H,F_r], w2_shard[F_r,H], group) -> [T,H] (per rank; gelu_tanh, no bias)",
    shape_keys=("world", "T", "H", "F"),
    **contract(globals()),
    check_shapes=CHECK_SHAPES,
    package="kernels.tp_mlp.variants",
    bench_shapes={"gpu": [_shape(8, t, 8192, 28672) for t in (1, 128, 4096)], "quick": [_shape(8, 4096, 8192, 28672)],
                  "cpu": [_shape(4, 64, 256, 1024)]},
    size_key=lambda s: s["T"] * s["H"],
    distributed=True,
    doc="Megatron tensor-parallel MLP: column-parallel GEMM, GELU, row-parallel GEMM, one all-reduce of [T, H].",
))


# ------------------------------------------------------------------------------------------------ the baseline
# tp_mlp the Megatron way: each rank's hidden features, its partial sum of y, and torch's all-reduce.
#
# Rank r multiplies x by its columns of w1 (no communication: GELU acts on each hidden feature alone), then its
# hidden features by its rows of w2: a partial sum of y over the features it owns. ``dist.all_reduce`` adds the
# partials in place (NCCL's ring or tree on GPUs, gloo's here); every rank ends with the whole y. The GEMMs run in
# fp32 and the partial is all-reduced in the op's dtype, as Megatron all-reduces bf16 activations.


@register("tp_mlp", "megatron", backend="torch",
          idea="Column-parallel x @ w1_shard, GELU, row-parallel @ w2_shard (a partial y), one all_reduce(sum).")
def megatron(x: torch.Tensor, w1_shard: torch.Tensor, w2_shard: torch.Tensor, group: object = None) -> torch.Tensor:
    with comm.span("compute", note="x @ w1_shard, gelu, @ w2_shard"):
        partial = (gelu_tanh(x.float() @ w1_shard.float()) @ w2_shard.float()).to(x.dtype)
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    return partial
