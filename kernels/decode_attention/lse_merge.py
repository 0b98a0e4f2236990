"""The lse_merge contract: merge S split-KV partial attention outputs by their log-sum-exp.

``lse_merge(o[S,B,H,D], lse[S,B,H]) -> [B,H,D]``

A split-KV attention kernel cuts each sequence's keys into S splits and computes, per split s, the softmax
attention over that split's keys alone, ``o[s]``, and the natural-log log-sum-exp of that split's scores,
``lse[s] = log(sum_j exp(score_j))``. The full attention is the partials weighted by each split's share of the
total softmax mass::

    m = max_s lse[s];   w_s = exp(lse[s] - m);   out = sum_s w_s o[s] / sum_s w_s

(subtracting the max keeps every weight <= 1: no overflow). A split with ``lse = -inf`` is empty (no keys): it
contributes nothing, whatever its ``o`` holds (``make`` puts NaN there: ``0 * NaN`` is NaN, so an empty split must be
skipped, not weighted by 0). When every split of a (b, h) is empty the result is 0.

``o`` is fp32, fp16 or bf16 (the output's dtype); ``lse`` is always float32. FlashInfer's ``merge_states`` and
vLLM's ``merge_attn_states`` are this op.
"""

from __future__ import annotations

import torch

from workbench.contracts import elem_size, randn, require, require_tensor
from workbench.registry import Op, register, register_op

OP_NAME = "lse_merge"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(o: torch.Tensor, lse: torch.Tensor) -> dict:
    """Check the inputs of lse_merge and return the shape {S, B, H, D}."""
    require_tensor(OP_NAME, "o", o, 4, DTYPES, "[S,B,H,D]")
    require_tensor(OP_NAME, "lse", lse, 3, (torch.float32,), "[S,B,H]")
    s, b, h, d = o.shape
    require(OP_NAME, tuple(lse.shape) == (s, b, h),
            f"lse must be [S,B,H] = {[s, b, h]} to match o {tuple(o.shape)}, got {tuple(lse.shape)}")
    return {"S": s, "B": b, "H": h, "D": d}


def reference(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Weight each non-empty split by exp(lse - max lse) in float64 and normalise; all-empty rows give 0."""
    validate(o, lse)
    ls = lse.double()
    live = torch.isfinite(ls)
    m = torch.where(live, ls, torch.full_like(ls, float("-inf"))).amax(dim=0, keepdim=True) if ls.shape[0] else ls
    w = torch.where(live, torch.exp(ls - m), torch.zeros_like(ls))  # [S, B, H]
    acc = (w[..., None] * torch.where(live[..., None], o.double(), torch.zeros((), dtype=torch.float64))).sum(0)
    total = w.sum(0)[..., None]
    return torch.where(total > 0, acc / total.clamp_min(1e-300), torch.zeros_like(acc))


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Name the merge's classic mistake: the running output not rescaled when the running max grows."""
    from kernels.decode_attention.reference import merge_without_rescale
    from workbench.checker import close_to

    if close_to(outs[0], merge_without_rescale(inputs[0], inputs[1]), atol, rtol):
        return "online_rescale"
    return None


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    s, b, h, d = (sizes[k] for k in ("S", "B", "H", "D"))
    o = randn((s, b, h, d), torch.float32, g, torch.device("cpu"))
    lse = randn((s, b, h), torch.float32, g, torch.device("cpu"), scale=3.0)  # weights spread over e^+-9
    if s > 1 and b and h:  # the last split of batch 0 is empty (a short sequence): its o is junk
        lse[-1, 0, :] = float("-inf")
        o[-1, 0, :] = float("nan")
    if s and b * h > 1:  # every split of the last (b, h) empty: the result is 0
        lse[:, -1, -1] = float("-inf")
        o[:, -1, -1] = float("nan")
    return o.to(dtype).to(device), lse.to(device)


def flops(S: int, B: int, H: int, D: int) -> float:
    return 2.0 * S * B * H * D


def nbytes(S: int, B: int, H: int, D: int, dtype: torch.dtype = torch.float32) -> float:
    return (S + 1) * B * H * D * elem_size(dtype) + 4 * S * B * H


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


OP = register_op(Op(
    name=OP_NAME,
    signature="lse_merge(o[S,B,H,D], lse[S,B,H]) -> [B,H,D]",
    shape_keys=("S", "B", "H", "D"),
    make=make, validate=validate, reference=reference, flops=flops, bytes=nbytes, tolerance=tolerance,
    explain=explain,
    check_shapes=[{"S": 1, "B": 1, "H": 1, "D": 1}, {"S": 3, "B": 2, "H": 3, "D": 16},
                  {"S": 4, "B": 17, "H": 2, "D": 33}, {"S": 5, "B": 3, "H": 4, "D": 64}],
    dtype_of=lambda o, lse: o.dtype,
    package="kernels.decode_attention.variants",
    bench_shapes={"gpu": [{"S": s, "B": 64, "H": 32, "D": 128} for s in (2, 4, 8, 16)],
                  "quick": [{"S": 8, "B": 64, "H": 32, "D": 128}], "cpu": [{"S": 4, "B": 4, "H": 8, "D": 64}]},
    size_key=lambda s: s["S"] * s["B"] * s["H"],
    doc="Merge split-KV partial attention outputs by their log-sum-exp (FlashInfer merge_states).",
))


@register(OP_NAME, "torch_merge", backend="torch",
          idea="Vendor-style baseline: weights exp(lse - max lse) in fp32, empty splits masked out, normalised sum.")
def torch_merge(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    live = torch.isfinite(lse)
    m = torch.where(live, lse, torch.full_like(lse, float("-inf"))).amax(dim=0, keepdim=True)
    w = torch.where(live, torch.exp(lse - m), torch.zeros_like(lse))
    acc = (w[..., None] * torch.where(live[..., None], o.float(), torch.zeros((), device=o.device))).sum(0)
    total = w.sum(0)[..., None]
    return torch.where(total > 0, acc / total.clamp_min(1e-30), torch.zeros_like(acc)).to(o.dtype)
