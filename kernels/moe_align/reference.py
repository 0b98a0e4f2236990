"""The moe_align contract ("align block size"): sort the routed slots by expert and pad each group to a block.

``moe_align(topk_ids[T,top_k] int32, E, block) -> (sorted_ids[P] int32, expert_ids[P/block] int32, n_padded[1] int32)``

Slot ``s = t*top_k + j`` is token t's j-th choice, expert ``topk_ids[t, j]``. A grouped GEMM over all experts
wants each expert's slots contiguous and every tile of ``block`` rows to belong to one expert, so:

- ``count[e]`` = slots routed to expert e; ``padded[e] = ceil(count[e] / block) * block`` (0 for an expert with
  no tokens: it gets no block at all); ``n_padded = sum(padded)``.
- ``sorted_ids[start_e : start_e + count[e]]`` are expert e's slot indices, where ``start_e`` is the exclusive
  prefix sum of ``padded``; the rest of its group, ``padded[e] - count[e]`` entries, and everything from
  ``n_padded`` to the end, hold the sentinel ``T*top_k`` (a slot that does not exist: kernels mask it).
- ``expert_ids[b]`` is the expert of rows ``b*block .. b*block+block-1``, for ``b < n_padded / block``;
  -1 for the blocks after that.
- ``P = T*top_k + E*(block-1)`` rounded up to a multiple of ``block`` is the largest ``n_padded`` can be, so the
  buffers are allocated before the counts are known (no host sync: the GEMM launch grid is ``P / block`` and
  blocks whose expert is -1 exit at once).
- The order of slots *within* an expert's group is not specified: the scatter uses atomics, so it changes from
  run to run on a GPU. The checker sorts each group of a kernel's ``sorted_ids`` before comparing; the
  reference lists them in increasing slot order.

Costs: no floating-point work; ``flops`` counts the integer operations (histogram, prefix sum, scatter: about 3
per slot plus the E-long scan). Bytes: the ids read twice (histogram, scatter) and the outputs written once.
"""

from __future__ import annotations

import torch

from workbench.contracts import require, require_tensor
from workbench.registry import Op, contract, empty, register, register_op

OP = "moe_align"


def sizes(T: int, top_k: int, E: int, block: int) -> tuple[int, int]:  # noqa: N803
    """Return (P, number of blocks): the lengths of sorted_ids and expert_ids."""
    p = T * top_k + E * (block - 1)
    p = -(-p // block) * block
    return p, p // block


def empty_outputs(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allocate the int32 outputs (sorted_ids[P], expert_ids[P/block], n_padded[1]) for a kernel to fill in full.

    They come from :func:`workbench.empty`, so under the checker an element a kernel never writes is caught.
    """
    p, nb = sizes(topk_ids.shape[0], topk_ids.shape[1], E, block)
    dev = topk_ids.device
    return empty((p,), torch.int32, dev), empty((nb,), torch.int32, dev), empty((1,), torch.int32, dev)


def validate(topk_ids: torch.Tensor, E: int, block: int) -> dict:  # noqa: N803
    """Check the inputs of moe_align and return the shape {T, top_k, E, block}."""
    require_tensor(OP, "topk_ids", topk_ids, 2, (torch.int32,), "[T,top_k]")
    require(OP, isinstance(E, int) and not isinstance(E, bool) and E >= 1, f"E must be an int >= 1, got {E!r}")
    require(OP, isinstance(block, int) and not isinstance(block, bool) and 1 <= block <= 1024,
            f"block must be an int in [1, 1024], got {block!r}")
    t, k = topk_ids.shape
    require(OP, 1 <= k <= E, f"topk_ids must have 1 <= top_k <= E={E} columns, got {k}")
    if topk_ids.numel():
        lo, hi = int(topk_ids.min()), int(topk_ids.max())
        require(OP, 0 <= lo and hi < E, f"topk_ids must hold expert ids in [0, E={E}), got values in [{lo}, {hi}]")
    return {"T": t, "top_k": k, "E": E, "block": block}


def reference(topk_ids: torch.Tensor, E: int, block: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: N803
    """Return (sorted_ids, expert_ids, n_padded), slots within a group in increasing order."""
    s = validate(topk_ids, E, block)
    n = s["T"] * s["top_k"]
    p, nb = sizes(s["T"], s["top_k"], E, block)
    flat = topk_ids.reshape(-1).long().cpu()
    sorted_ids = torch.full((p,), n, dtype=torch.int32)
    expert_ids = torch.full((nb,), -1, dtype=torch.int32)
    start = 0
    for e in range(E):
        slots = (flat == e).nonzero().reshape(-1)
        padded = -(-slots.numel() // block) * block
        sorted_ids[start:start + slots.numel()] = slots.to(torch.int32)
        expert_ids[start // block:(start + padded) // block] = e
        start += padded
    dev = topk_ids.device
    return sorted_ids.to(dev), expert_ids.to(dev), torch.tensor([start], dtype=torch.int32, device=dev)


def canonical(outs: list[torch.Tensor], refs: list[torch.Tensor], topk_ids: torch.Tensor, E: int,  # noqa: N803
              block: int) -> list[torch.Tensor]:
    """Sort a kernel's sorted_ids within each expert group of the reference (the contract leaves that order free)."""
    sorted_ids, expert_ids, n_padded = outs
    if tuple(sorted_ids.shape) != tuple(refs[0].shape):
        return outs
    out = sorted_ids.clone()
    ref_experts = refs[1].cpu()
    b = 0
    nb = int((ref_experts >= 0).sum())
    while b < nb:
        e = int(ref_experts[b])
        end = b
        while end < nb and int(ref_experts[end]) == e:
            end += 1
        lo, hi = b * block, end * block
        out[lo:hi] = torch.sort(sorted_ids[lo:hi]).values
        b = end
    return [out, expert_ids, n_padded]


def make(sizes_: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    t, k, e, block = (sizes_[n] for n in ("T", "top_k", "E", "block"))
    if case == "skewed":  # a Zipf-like router: expert i is picked with weight 1/(i+1)
        pw = 1.0 / torch.arange(1, e + 1, dtype=torch.float64)
    else:
        pw = torch.ones(e, dtype=torch.float64)
    # Each token's top_k experts are distinct, like a real router's.
    ids = torch.stack([torch.multinomial(pw, k, replacement=False, generator=g) for _ in range(t)]) if t \
        else torch.zeros(0, k, dtype=torch.long)
    if case == "one_expert" and t:  # every token picks expert 0 first
        first = ids[:, :1].clone()
        ids = torch.where(ids == 0, first, ids)
        ids[:, 0] = 0
    return ids.to(torch.int32).to(device), e, block


def flops(T: int, top_k: int, E: int, block: int) -> float:  # noqa: N803
    return float(3 * T * top_k + E)


def nbytes(T: int, top_k: int, E: int, block: int, dtype: torch.dtype = torch.int32) -> float:  # noqa: N803
    p, nb = sizes(T, top_k, E, block)
    return float(4 * (2 * T * top_k + p + nb + 1))


def padding_waste(counts: torch.Tensor, block: int) -> float:
    """Return the fraction of the padded rows that are padding, for per-expert slot ``counts`` and ``block``."""
    c = counts.long()
    padded = (-(-c // block) * block).sum().item()
    return 0.0 if padded == 0 else 1.0 - c.sum().item() / padded


OP_SPEC = register_op(Op(
    name=OP,
    signature="moe_align(topk_ids[T,top_k], E, block) -> (sorted_ids[P], expert_ids[P/block], n_padded[1])",
    shape_keys=("T", "top_k", "E", "block"),
    **contract(globals()),
    dtypes=(torch.int32,),
    check_shapes=[{"T": 1, "top_k": 2, "E": 8, "block": 16},  # most experts get no slot
                  {"T": 17, "top_k": 4, "E": 60, "block": 16},
                  {"T": 100, "top_k": 8, "E": 256, "block": 64},
                  {"T": 5, "top_k": 4, "E": 4, "block": 1},  # top_k = E; block 1: no padding
                  {"T": 1000, "top_k": 2, "E": 8, "block": 128}],
    tolerance=lambda dt, shape: (0.0, 0.0),
    package="kernels.moe_align.variants",
    bench_shapes={"gpu": [{"T": t, "top_k": k, "E": e, "block": 64} for t in (64, 4096, 16384)
                          for e, k in ((8, 2), (256, 8))],
                  "quick": [{"T": 4096, "top_k": 8, "E": 256, "block": 64}],
                  "cpu": [{"T": 64, "top_k": 4, "E": 32, "block": 16}]},
    size_key=lambda s: s["T"] * s["top_k"],
    cases=("random", "skewed", "one_expert"),
    doc="Counting sort of the routed slots by expert with block padding: histogram, prefix sum, atomic scatter.",
    outputs=("sorted_ids", "expert_ids", "n_padded"),
    out_dtypes=lambda dt: (torch.int32, torch.int32, torch.int32),
    canonical=canonical,
))


@register(OP, "torch_sort", backend="torch",
          idea="Baseline: a stable torch.sort of the flat ids, bincount, cumsum and index arithmetic for the pads.")
def torch_sort(topk_ids: torch.Tensor, E: int, block: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: N803
    t, k = topk_ids.shape
    n = t * k
    p, nb = sizes(t, k, E, block)
    flat = topk_ids.reshape(-1).long()
    order = torch.sort(flat, stable=True).indices  # slots grouped by expert, increasing within a group
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + block - 1) // block * block
    start = torch.cumsum(padded, 0) - padded  # exclusive prefix sum: where each group begins
    cstart = torch.cumsum(counts, 0) - counts  # where each group begins in `order`
    e_of = flat[order]
    pos = start[e_of] + (torch.arange(n, device=flat.device) - cstart[e_of])
    sorted_ids = torch.full((p,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[pos] = order.to(torch.int32)
    n_pad = int(padded.sum())
    expert_ids = torch.full((nb,), -1, dtype=torch.int32, device=flat.device)
    expert_ids[: n_pad // block] = torch.repeat_interleave(torch.arange(E, device=flat.device, dtype=torch.int32),
                                                           padded // block)
    return sorted_ids, expert_ids, padded.sum().reshape(1).to(torch.int32)
