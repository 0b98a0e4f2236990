"""The moe_topk contract: MoE routing, softmax over the experts then each token's top-k.

``moe_topk(router_logits[T,E], top_k, renormalize=True) -> (weights[T,top_k] float32, ids[T,top_k] int32)``

- ``p = softmax(router_logits)`` over the E experts, computed in float32 (or wider) whatever the logits' dtype.
- ``ids[t]`` are the ``top_k`` experts with the largest ``p[t]``, in decreasing order of ``p`` (equal
  probabilities: the lower expert id first); ``weights[t, j] = p[t, ids[t, j]]``, divided by the sum of the
  token's ``top_k`` weights when ``renormalize`` (Mixtral, Qwen3-MoE), raw softmax probabilities when not
  (DeepSeek-V2 style).
- Outputs are always float32 weights and int32 expert ids: they feed ``moe_align`` and the expert GEMMs.
- FLOPs: 4*T*E for the softmax (max, subtract, exp, sum) plus T*E*top_k compares for a selection by repeated
  argmax, which is what the kernels do for small top_k; bytes: the logits in, 8 bytes per selected slot out.
"""

from __future__ import annotations

import torch

from workbench import empty
from workbench.contracts import elem_size, require, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OP = "moe_topk"


def validate(router_logits: torch.Tensor, top_k: int, renormalize: bool = True) -> dict:
    """Check the inputs of moe_topk and return the shape {T, E, top_k}."""
    require_tensor(OP, "router_logits", router_logits, 2, DTYPES, "[T,E]")
    t, e = router_logits.shape
    require(OP, e >= 1, f"router_logits must have at least one expert column, got shape {tuple(router_logits.shape)}")
    require(OP, isinstance(top_k, int) and not isinstance(top_k, bool) and 1 <= top_k <= e,
            f"top_k must be an int in [1, E={e}], got {top_k!r}")
    require(OP, isinstance(renormalize, bool), f"renormalize must be a bool, got {renormalize!r}")
    return {"T": t, "E": e, "top_k": top_k}


def reference(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (weights, ids) computed in float64; ties go to the lower expert id."""
    validate(router_logits, top_k, renormalize)
    p = torch.softmax(router_logits.double(), dim=-1)
    e = p.shape[-1]
    # A stable descending sort puts equal probabilities in increasing expert order.
    order = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, :top_k] if e else p.long()
    w = torch.gather(p, 1, order)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w, order.to(torch.int32)


def outputs(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the outputs a kernel fills: weights fp32 [T, top_k] and ids int32 [T, top_k] (poisoned when checked)."""
    t = router_logits.shape[0]
    return (empty((t, top_k), torch.float32, router_logits.device),
            empty((t, top_k), torch.int32, router_logits.device))


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    t, e, k = sizes["T"], sizes["E"], sizes["top_k"]
    # Distinct logits even in bf16 (no ties): a permutation of an evenly spaced ladder per token, plus noise
    # smaller than half a step.
    step = 8.0 / max(e, 1)
    ladder = torch.arange(e, dtype=torch.float32) * step - 4.0
    rows = [ladder[torch.randperm(e, generator=g)] for _ in range(t)]
    logits = torch.stack(rows) if t else torch.zeros(0, e)
    if case == "one_expert":  # every token's favourite is expert 0 by a wide margin
        logits[:, 0] = 10.0
    elif case == "ties":  # three levels only: equal probabilities everywhere, the lower expert id must win
        logits = (logits > 1.0).float() - (logits < -1.0).float()
    return logits.to(dtype).to(device), k


def flops(T: int, E: int, top_k: int) -> float:
    return float(4 * T * E + T * E * top_k)


def nbytes(T: int, E: int, top_k: int, dtype: torch.dtype = torch.float32) -> float:
    return float(T * E * elem_size(dtype) + T * top_k * 8)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # Weights are float32 whatever the logits' dtype: only float32 rounding separates a kernel from float64.
    return (1e-6, 1e-5)


OP_SPEC = register_op(Op(
    name=OP,
    signature="moe_topk(router_logits[T,E], top_k, renormalize=True) -> (weights[T,top_k], ids[T,top_k])",
    shape_keys=("T", "E", "top_k"),
    **contract(globals()),
    check_shapes=[{"T": 1, "E": 8, "top_k": 2},
                  {"T": 17, "E": 60, "top_k": 4},  # E not a power of two
                  {"T": 33, "E": 128, "top_k": 8},
                  {"T": 5, "E": 4, "top_k": 4},  # top_k = E
                  {"T": 9, "E": 256, "top_k": 1}],
    call_kwargs=("renormalize",),
    flags={"renormalize": (True, False)},
    package="kernels.moe_topk.variants",
    bench_shapes={"gpu": [{"T": t, "E": e, "top_k": k} for t in (64, 4096, 16384) for e, k in ((8, 2), (256, 8))],
                  "quick": [{"T": 4096, "E": 256, "top_k": 8}],
                  "cpu": [{"T": 16, "E": 64, "top_k": 4}]},
    size_key=lambda s: s["T"],
    cases=("random", "one_expert", "ties"),
    doc="Router softmax + top-k: tiny and memory-bound; fused, it saves a round trip of the [T,E] probabilities.",
    outputs=("weights", "ids"),
    out_dtypes=lambda dt: (torch.float32, torch.int32),
))


@register(OP, "torch_topk", backend="torch",
          idea="Baseline: torch.softmax in float32, a stable descending sort for the top-k, renormalize.")
def torch_topk(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.softmax(router_logits.float(), dim=-1)
    ids = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, :top_k]  # ties: lower id first
    w = torch.gather(p, 1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w.contiguous(), ids.to(torch.int32).contiguous()
