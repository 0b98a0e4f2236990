"""The moe contract (a SwiGLU mixture-of-experts layer, Mixtral-style routing).

``moe(x[T,d], router_logits[T,E], w1[E,2I,d], w2[E,d,I], top_k, renormalize=True) -> [T,d]``

- Routing: p = softmax(router_logits) over E; each token takes its top_k experts with weights p[e], divided by
  their sum when ``renormalize``.
- Expert e: ``(silu(x @ w1[e,:I].T) * (x @ w1[e,I:].T)) @ w2[e].T`` (rows 0..I-1 of w1 are the gate, I..2I-1 up).
- Output: the routing-weighted sum of each token's top_k expert outputs.
- FLOPs: 6*T*top_k*d*I (gate+up: 4dI, down: 2dI per token-expert pair).
- Bytes: x and out, the router logits, and the weights of the experts actually hit, min(E, T*top_k) of them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
             renormalize: bool = True) -> dict:
    """Check the inputs of moe and return the shape {T, d, I, E, top_k}."""
    require_tensor("moe", "x", x, 2, DTYPES, "[T,d]")
    require_tensor("moe", "router_logits", router_logits, 2, DTYPES, "[T,E]")
    require_tensor("moe", "w1", w1, 3, DTYPES, "[E,2I,d]")
    require_tensor("moe", "w2", w2, 3, DTYPES, "[E,d,I]")
    require_same_dtype("moe", x=x, router_logits=router_logits, w1=w1, w2=w2)
    t, d, i, e = validate_expert_shapes("moe", x, w1, w2)
    validate_routing("moe", router_logits, t, e, top_k, renormalize)
    return {"T": t, "d": d, "I": i, "E": e, "top_k": top_k}


def validate_expert_shapes(op: str, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w1_name: str = "w1",
                           w2_name: str = "w2") -> tuple[int, int, int, int]:
    """Check x[T,d], w1[E,2I,d] and w2[E,d,I] agree for a moe-style op; return (T, d, I, E)."""
    t, d = x.shape
    e = w1.shape[0]
    require(op, w1.shape[2] == d and w1.shape[1] % 2 == 0,
            f"{w1_name} must be [E,2I,d] with d={d}, got {tuple(w1.shape)}")
    i = w1.shape[1] // 2
    require(op, tuple(w2.shape) == (e, d, i),
            f"{w2_name} must be [E,d,I] = [{e},{d},{i}], got {tuple(w2.shape)}")
    return t, d, i, e


def validate_routing(op: str, router_logits: torch.Tensor, t: int, e: int, top_k: int, renormalize: bool) -> None:
    """Check the routing arguments of a moe-style op: router_logits[T,E], an int top_k in [1, E], a bool."""
    require(op, tuple(router_logits.shape) == (t, e),
            f"router_logits must be [T,E] = [{t},{e}], got {tuple(router_logits.shape)}")
    require(op, isinstance(top_k, int) and not isinstance(top_k, bool) and 1 <= top_k <= e,
            f"top_k must be an int in [1, E={e}], got {top_k!r}")
    require(op, isinstance(renormalize, bool), f"renormalize must be a bool, got {renormalize!r}")


def route(router_logits: torch.Tensor, top_k: int, renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (weights[T,top_k] in fp32 or wider, expert ids[T,top_k]) from the router logits."""
    p = torch.softmax(router_logits.to(torch.promote_types(router_logits.dtype, torch.float32)), dim=-1)
    w, ids = torch.topk(p, top_k, dim=-1)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w, ids


def swiglu(h: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Return SiLU(gate) * up of gate/up rows ``h[n, 2I]`` (gate = columns 0..I-1), computed in fp32, as ``dtype``.

    This is the activation of the torch paths (torch_loop, torch_grouped_mm, expert parallelism): fp32 math, then
    rounded to the input dtype before the down projection, as a kernel with a fused epilogue stores it.
    """
    i = h.shape[-1] // 2
    return (F.silu(h[..., :i].float()) * h[..., i:].float()).to(dtype)


def reference(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
              renormalize: bool = True) -> torch.Tensor:
    """Route and run every (token, expert) pair in float64."""
    validate(x, router_logits, w1, w2, top_k, renormalize)
    return _moe64(x, router_logits, w1, w2, top_k, renormalize, lambda g, u: F.silu(g) * u)


def _moe64(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
           renormalize: bool, act: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Return the moe layer in float64 with the activation ``act(gate, up)``."""
    w, ids = route(router_logits.double(), top_k, renormalize)
    xd, w1d, w2d = x.double(), w1.double(), w2.double()
    i = w1.shape[1] // 2
    out = torch.zeros_like(xd)
    for e in range(w1.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = xd[tok] @ w1d[e].T  # [n, 2I]
        y = act(h[:, :i], h[:, i:]) @ w2d[e].T  # [n, d]
        out.index_add_(0, tok, y * w[tok, slot, None])
    return out


# The classic SwiGLU slips: the up half dropped, SiLU left out or a bare sigmoid, gate and up swapped.
_WRONG_ACTS = (lambda g, u: F.silu(g), lambda g, u: g * u, lambda g, u: torch.sigmoid(g) * u,
               lambda g, u: F.silu(u) * g)


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'swiglu' when the output is the layer with one of the classic wrong expert activations."""
    from workbench.checker import close_to

    x, logits, w1, w2, top_k = inputs[:5]
    renorm = kw.get("renormalize", True)
    for act in _WRONG_ACTS:
        if close_to(outs[0], _moe64(x, logits, w1, w2, top_k, renorm, act), atol, rtol):
            return "swiglu"
    return None


# The three MoE layers the notebook and the benchmarks use (one layer's experts; shared experts left out).
MODELS: dict[str, dict[str, int]] = {
    "mixtral-8x7b": {"E": 8, "top_k": 2, "d": 4096, "I": 14336},
    "deepseek-v3": {"E": 256, "top_k": 8, "d": 7168, "I": 2048},
    "qwen3-30b-a3b": {"E": 128, "top_k": 8, "d": 2048, "I": 768},
}
CPU_SCALE = 64  # cpu mode divides d and I by this (same E, top_k and routing; 4096x less FLOPs per token)


def model_shape(model: str, T: int, scale: int = 1) -> dict:  # noqa: N803
    """Return the moe shape of ``model`` for T tokens, d and I divided by ``scale`` (cpu mode: CPU_SCALE)."""
    m = MODELS[model]
    return {"T": T, "d": max(1, m["d"] // scale), "I": max(1, m["I"] // scale), "E": m["E"], "top_k": m["top_k"]}


def _weights(shape: tuple, dtype: torch.dtype, g: torch.Generator, device: torch.device, scale: float,
             seed: int) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    if device.type == "cuda" and n > 2**26:  # GPU benchmark sizes (DeepSeek-V3: 11.3 G weights): make them there
        gd = torch.Generator(device=device).manual_seed(seed)
        return (torch.randn(shape, generator=gd, device=device, dtype=torch.float32) * scale).to(dtype)
    return randn(shape, dtype, g, device, scale=scale)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    t, d, i, e, k = (sizes[n] for n in ("T", "d", "I", "E", "top_k"))
    x = randn((t, d), dtype, g, device)
    # Distinct logits (no ties even in fp16): a random permutation of an evenly spaced ladder, per token.
    ladder = torch.arange(e, dtype=torch.float32) * (4.0 / max(e, 1))
    logits = torch.stack([ladder[torch.randperm(e, generator=g)] for _ in range(t)]) if t else torch.zeros(0, e)
    if case == "one_expert":  # every token's favourite is expert 0 by a wide margin
        logits[:, 0] = 10.0
    w1 = _weights((e, 2 * i, d), dtype, g, device, max(d, 1) ** -0.5, seed + 1)  # d or I = 0: empty weights
    w2 = _weights((e, d, i), dtype, g, device, max(i, 1) ** -0.5, seed + 2)
    return x, logits.to(dtype).to(device), w1, w2, k


def flops(T: int, d: int, I: int, E: int, top_k: int) -> float:  # noqa: E741
    return 6.0 * T * top_k * d * I


def nbytes(T: int, d: int, I: int, E: int, top_k: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: E741
    experts_hit = min(E, T * top_k)
    return (2 * T * d + T * E + experts_hit * 3 * I * d) * elem_size(dtype)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (3e-3, 3e-3), torch.bfloat16: (2e-2, 2e-2)}[dtype]


OP = register_op(Op(
    name="moe",
    signature="moe(x[T,d], router_logits[T,E], w1[E,2I,d], w2[E,d,I], top_k, renormalize=True) -> [T,d]",
    shape_keys=("T", "d", "I", "E", "top_k"),
    **contract(globals()),
    check_shapes=[{"T": 1, "d": 16, "I": 16, "E": 4, "top_k": 2},  # T = 1: most experts get no token
                  {"T": 17, "d": 33, "I": 20, "E": 8, "top_k": 2},  # d, I not multiples of a block
                  {"T": 9, "d": 32, "I": 24, "E": 4, "top_k": 1},
                  {"T": 5, "d": 16, "I": 16, "E": 4, "top_k": 4}],  # top_k = E
    call_kwargs=("renormalize",),
    flags={"renormalize": (True, False)},
    package="kernels.moe.variants",
    # Prefill (4096 tokens) and decode (1 and 64 tokens) at each model's shape; the H200 goals (Mixtral prefill,
    # DeepSeek-V3 decode) are measured by benchmarks/moe_goals.py, which also times the dense matmul and the copy.
    bench_shapes={"gpu": [model_shape(m, t) for m in MODELS for t in (1, 64, 4096)],
                  "quick": [model_shape("qwen3-30b-a3b", t) for t in (64, 1024)],
                  "cpu": [model_shape("mixtral-8x7b", 64, CPU_SCALE), model_shape("deepseek-v3", 4, CPU_SCALE)]},
    size_key=lambda s: s["T"],
    cases=("random", "one_expert"),
    doc="Top-k routed SwiGLU experts; prefill is compute-bound, decode is bound by reading expert weights.",
))


@register("moe", "torch_loop", backend="torch",
          idea="Baseline: route, then loop over experts with torch matmuls and index_add the weighted outputs.")
def torch_loop(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
               renormalize: bool = True) -> torch.Tensor:
    w, ids = route(router_logits, top_k, renormalize)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        h = x[tok] @ w1[e].T
        y = swiglu(h, x.dtype) @ w2[e].T
        out.index_add_(0, tok, y.float() * w[tok, slot, None])
    return out.to(x.dtype)
