"""The ring_attention contract: attention over a sequence sharded across ranks (context parallelism).

``ring_attention(q[B,H,S,D], k[B,H,S,D], v[B,H,S,D], group, causal=False) -> [B,H,S,D]``, called on every rank
with its own shard.

* The sequence of ``world * S`` tokens is cut **contiguously**: rank ``r`` holds the queries, keys and values of
  positions ``r*S .. r*S + S - 1`` (every rank the same ``S``). Each rank returns the attention output of its own
  queries over the **whole** sequence's keys: ``softmax(scale * q_r K^T) V`` with ``K``, ``V`` every rank's shards
  in rank order, ``scale = 1/sqrt(D)``.
* ``causal=True``: query position ``i`` sees key positions ``j <= i`` (global positions). With contiguous shards
  rank ``r`` needs the blocks of ranks ``0..r`` only (rank ``r``'s own block under the triangular mask), so rank 0
  computes one block and rank ``world - 1`` computes ``world``: the **load imbalance** of causal context
  parallelism. Zig-zag sharding (each rank takes chunk ``r`` and chunk ``2*world - 1 - r``, as Llama 3's context
  parallelism and ring-flash-attention's zigzag do) evens it out; this contract keeps the contiguous layout, whose
  imbalance the notebook's timeline shows.
* q, k, v share one dtype (fp32, fp16, bf16), which the output has.

Ring attention (Liu et al., 2023) never gathers K and V: the ranks pass their K/V block to the right neighbour
``world - 1`` times, each rank computing one block's partial attention per step (output ``o_b`` and log-sum-exp
``lse_b`` per query) and folding it into a running result with the **log-sum-exp merge** of split-KV decoding:
``kernels.decode_attention.reference.torch_merge``, the ``lse_merge`` op's baseline, which this package calls
(:func:`merge`) rather than rewriting. The reference gathers every shard in float64 and runs full softmax
attention.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from kernels.decode_attention.reference import merge_without_rescale, torch_merge
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "ring_attention"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None, causal: bool = False) -> dict:
    """Check one rank's inputs of ring_attention and return its shape {B, H, S, D} (S: this rank's shard)."""
    require_tensor(OP_NAME, "q", q, 4, DTYPES, "[B,H,S,D]")
    require_tensor(OP_NAME, "k", k, 4, DTYPES, "[B,H,S,D]")
    require_tensor(OP_NAME, "v", v, 4, DTYPES, "[B,H,S,D]")
    require_same_dtype(OP_NAME, q=q, k=k, v=v)
    require(OP_NAME, tuple(k.shape) == tuple(q.shape) and tuple(v.shape) == tuple(q.shape),
            f"k and v must have q's shape {tuple(q.shape)} (every rank holds S tokens of q, k and v), got "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    require(OP_NAME, q.shape[-1] >= 1 and q.shape[2] >= 1, f"S and D must be >= 1, got q {tuple(q.shape)}")
    require(OP_NAME, isinstance(causal, bool), f"causal must be a bool, got {causal!r}")
    b, h, s, d = q.shape
    return {"B": b, "H": h, "S": s, "D": d}


def reference(rank_inputs: list[tuple], causal: bool = False) -> list[torch.Tensor]:
    """Gather every rank's shard in float64, run full (optionally causal) softmax attention, return each rank's rows."""
    q = torch.cat([r[0].double().cpu() for r in rank_inputs], dim=2)
    k = torch.cat([r[1].double().cpu() for r in rank_inputs], dim=2)
    v = torch.cat([r[2].double().cpu() for r in rank_inputs], dim=2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return list(out.split(rank_inputs[0][0].shape[2], dim=2))


# ------------------------------------------------------------------------------------------ the pieces of a ring

SKIP, FULL, DIAGONAL = "skip", "full", "diagonal"


def block_mask(rank: int, source: int, causal: bool) -> str:
    """Return how rank ``rank``'s queries see the K/V block of rank ``source``: full, diagonal (causal) or skip."""
    if not causal or source < rank:
        return FULL
    return DIAGONAL if source == rank else SKIP


def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Return one K/V block's partial attention for q in fp32: (o [B,H,S,D], lse [B,H,S]) (natural log).

    ``mask``: :data:`FULL`, :data:`DIAGONAL` (query i of the block sees keys 0..i of the same block) or
    :data:`SKIP` (no key visible: o = 0, lse = -inf, which the merge skips).
    """
    if mask == SKIP:
        return (torch.zeros(q.shape, dtype=torch.float32, device=q.device),
                torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device))
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask == DIAGONAL:
        n = q.shape[2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    o = torch.softmax(scores, dim=-1) @ v.float()
    return o, lse


def merge(o_acc: torch.Tensor, lse_acc: torch.Tensor, o_b: torch.Tensor,
          lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold one block's partial (o_b, lse_b) into the running (o_acc, lse_acc): decode attention's LSE merge.

    The output is ``torch_merge`` of the two partials (each weighted by ``exp(lse - max lse)``, a block with
    ``lse = -inf`` skipped); the running log-sum-exp is the log-sum-exp of the two.
    """
    b, h, s, d = o_acc.shape  # lse_merge's layout: o [splits, B, H, D], lse [splits, B, H]; queries as its heads
    lse2 = torch.stack([lse_acc, lse_b])
    o = torch_merge(torch.stack([o_acc, o_b]).reshape(2, b, h * s, d), lse2.reshape(2, b, h * s))
    return o.reshape(b, h, s, d), torch.logsumexp(lse2, dim=0)


def empty_state(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the running result before any block: o = 0 (fp32) and lse = -inf per query."""
    return (torch.zeros(q.shape, dtype=torch.float32, device=q.device),
            torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device))


def ring_order(rank: int, world: int) -> list[int]:
    """Return the ranks whose K/V block rank ``rank`` holds at steps 0, 1, ...: its own, then from the left."""
    return [(rank - step) % world for step in range(world)]


# ------------------------------------------------------------------------------------------ inputs, costs, checks


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> list[tuple]:
    """Return each rank's (q, k, v) shard of one random [B, H, world*S, D] sequence (contiguous shards)."""
    g = torch.Generator().manual_seed(seed)
    world, b, h, s, d = (sizes[key] for key in ("world", "B", "H", "S", "D"))
    cpu = torch.device("cpu")
    full = [randn((b, h, world * s, d), torch.float32, g, cpu) for _ in range(3)]
    full[1] = full[1] * 1.5  # sharper scores: the blocks' maxima differ, so a merge that forgets to rescale shows
    return [tuple(t[:, :, r * s:(r + 1) * s].contiguous().to(dtype).to(device) for t in full) for r in range(world)]


def flops(world: int, B: int, H: int, S: int, D: int, causal: bool = False) -> float:  # noqa: N803
    n = world * S
    return 4.0 * B * H * n * n * D * (0.5 if causal else 1.0)  # q.k and p.v over the whole sequence


def nbytes(world: int, B: int, H: int, S: int, D: int, causal: bool = False,  # noqa: N803
           dtype: torch.dtype = torch.float32) -> float:
    # every rank reads its q, k, v and writes its output once: 4 B*H*S*D per rank; the K/V blocks it receives
    # travel over the links (world - 1 blocks of 2 B*H*S*D per rank), not counted as DRAM traffic here
    return 4.0 * world * B * H * S * D * elem_size(dtype)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


def no_rescale_outputs(rank_inputs: list[tuple], causal: bool) -> list[torch.Tensor]:
    """Return what each rank gets when its ring merge forgets to rescale the running output (float64 partials)."""
    world = len(rank_inputs)
    out = []
    for rank, (q, _, _) in enumerate(rank_inputs):
        parts = [block_attention(q.double(), rank_inputs[src][1].double(), rank_inputs[src][2].double(),
                                 block_mask(rank, src, causal)) for src in ring_order(rank, world)]
        out.append(merge_without_rescale(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])))
    return out


def explain(outs: list, refs: list, inputs: list, kw: dict, atol: float, rtol: float) -> str | None:
    """Name ring attention's classic mistake: blocks merged without rescaling the running output (online_rescale)."""
    from workbench.checker import close_to

    outs = [o[0] if isinstance(o, (list, tuple)) else o for o in outs]  # each rank's one output
    wrong = no_rescale_outputs(inputs, bool(kw.get("causal", False)))
    if len(outs) == len(wrong) and all(close_to(o, w.to(o.dtype), atol, rtol) for o, w in zip(outs, wrong,
                                                                                               strict=True)):
        return "online_rescale"
    return None


def _shape(world: int, b: int, h: int, s: int, d: int) -> dict:
    return {"world": world, "B": b, "H": h, "S": s, "D": d}


CHECK_SHAPES = [_shape(1, 1, 1, 3, 8), _shape(2, 1, 2, 5, 16), _shape(3, 2, 1, 4, 8), _shape(4, 1, 2, 3, 16)]

OP = register_op(Op(
    name=OP_NAME,
    signature="ring_attention(q[B,H,S,D], k[B,H,S,D], v[B,H,S,D], group, causal=False) -> [B,H,S,D] (per rank)",
    shape_keys=("world", "B", "H", "S", "D"),
    **contract(globals()),
    check_shapes=CHECK_SHAPES,
    call_kwargs=("causal",),
    flags={"causal": (False, True)},
    package="kernels.ring_attention.variants",
    bench_shapes={"gpu": [_shape(8, 1, 32, s, 128) for s in (1024, 4096)], "quick": [_shape(8, 1, 32, 4096, 128)],
                  "cpu": [_shape(4, 1, 4, 64, 32)]},
    size_key=lambda s: s["world"] * s["S"],
    distributed=True,
    doc="Context parallelism: attention over a sequence sharded across ranks, K/V blocks passed around a ring.",
))


# ------------------------------------------------------------------------------------------------ the baseline
# Gather every rank's K and V (one all_gather each), then one local attention over the whole sequence: simple and
# correct, and what the ring avoids: every rank holds the whole sequence's K and V at once (memory grows with
# world * S) and computes nothing until the gather is done.


@register("ring_attention", "torch_allgather", backend="torch",
          idea="Baseline: all_gather K and V from every rank, then one (causal-offset) attention over them.")
def torch_allgather(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: object = None,
                    causal: bool = False) -> torch.Tensor:
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    ks, vs = [torch.empty_like(k) for _ in range(world)], [torch.empty_like(v) for _ in range(world)]
    dist.all_gather(ks, k.contiguous(), group=group)
    dist.all_gather(vs, v.contiguous(), group=group)
    kk, vv = torch.cat(ks[:rank + 1] if causal else ks, dim=2), torch.cat(vs[:rank + 1] if causal else vs, dim=2)
    s = q.shape[2]
    scores = (q.float() @ kk.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:  # query i of rank r sits at r*S + i and sees keys j <= r*S + i
        i = torch.arange(s, device=q.device)[:, None] + rank * s
        j = torch.arange(kk.shape[2], device=q.device)[None, :]
        scores = scores.masked_fill(j > i, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vv.float()).to(q.dtype)
