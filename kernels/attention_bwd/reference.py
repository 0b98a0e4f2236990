"""The attention_bwd contract: the gradients of attention, given what a FlashAttention forward saves.

``attention_bwd(q, k, v, o, lse, do, causal=False, scale=None) -> (dq, dk, dv)``

- ``q[B,H,Sq,D]``, ``k, v[B,H,Sk,D]`` are the forward's inputs; ``o[B,H,Sq,D]`` its output (same dtype);
  ``lse[B,H,Sq]`` (float32) the natural-log logsumexp of each row of the scaled, masked scores
  ``S = scale * q k^T``, so that ``P = exp(S - lse)``; ``do[B,H,Sq,D]`` the gradient of the loss w.r.t. ``o``.
- ``causal`` and ``scale`` mean what they mean for ``attention`` (SDPA semantics, top-left aligned mask).
- Returns ``dq`` (like q), ``dk`` and ``dv`` (like k), all in the input dtype.
- This is what FlashAttention's backward kernel receives: the forward is not recomputed (only P, tile by tile,
  from q, k and lse). FLOPs follow FlashAttention-2: five matmuls, 10*B*H*Sq*Sk*D, halved when causal
  (2.5x the forward).
- The float64 reference ignores ``o`` and ``lse`` and differentiates the float64 forward exactly; a kernel that
  uses the given ``o`` (rounded to the dtype) for ``D_i = rowsum(dO_i * O_i)`` stays well inside the tolerance.
"""

from __future__ import annotations

import functools
import math
import warnings

import torch

from kernels.attention.reference import BENCH_SHAPES
from workbench import MODE
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OP = "attention_bwd"


def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
             do: torch.Tensor, causal: bool = False, scale: float | None = None) -> dict:
    """Check the inputs of attention_bwd and return the shape {B, H, Sq, Sk, D}."""
    for name, t, dims in (("q", q, "[B,H,Sq,D]"), ("k", k, "[B,H,Sk,D]"), ("v", v, "[B,H,Sk,D]"),
                          ("o", o, "[B,H,Sq,D]"), ("do", do, "[B,H,Sq,D]")):
        require_tensor(OP, name, t, 4, DTYPES, dims)
    require_tensor(OP, "lse", lse, 3, (torch.float32,), "[B,H,Sq]")
    require_same_dtype(OP, q=q, k=k, v=v, o=o, do=do)
    b, h, sq, d = q.shape
    sk = k.shape[2]
    require(OP, tuple(k.shape) == (b, h, sk, d),
            f"k must be [B,H,Sk,D] = [{b},{h},Sk,{d}] to match q {tuple(q.shape)}, got {tuple(k.shape)}")
    require(OP, tuple(v.shape) == tuple(k.shape), f"v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    for name, t in (("o", o), ("do", do)):
        require(OP, tuple(t.shape) == tuple(q.shape),
                f"{name} must have q's shape {tuple(q.shape)}, got {tuple(t.shape)}")
    require(OP, tuple(lse.shape) == (b, h, sq), f"lse must be [B,H,Sq] = [{b},{h},{sq}], got {tuple(lse.shape)}")
    require(OP, d >= 1, f"the head dimension D must be >= 1, got q {tuple(q.shape)}")
    require(OP, isinstance(causal, bool), f"causal must be a bool, got {causal!r}")
    require(OP, scale is None or (isinstance(scale, (int, float)) and math.isfinite(scale)),
            f"scale must be None or a finite float, got {scale!r}")
    return {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d}


def _forward64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None):
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(0)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v.double(), torch.logsumexp(s, dim=-1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
              do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    """Differentiate the float64 forward with autograd and return (dq, dk, dv) in float64."""
    validate(q, k, v, o, lse, do, causal, scale)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out, _ = _forward64(q64, k64, v64, causal, scale)
        dq, dk, dv = torch.autograd.grad(out, (q64, k64, v64), do.double())
    return dq, dk, dv


def make(shape: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    b, h, sq, sk, d = (shape[k] for k in ("B", "H", "Sq", "Sk", "D"))
    require(OP, d >= 1, f"the head dimension D must be >= 1, got D={d}")  # the saved forward divides by sqrt(D)
    q, k, v = (randn(s, dtype, g, torch.device("cpu")) for s in ((b, h, sq, d), (b, h, sk, d), (b, h, sk, d)))
    do = randn((b, h, sq, d), dtype, g, torch.device("cpu"))
    # What the forward saved: O rounded to the dtype and the fp32 logsumexp, both from the exact forward of the
    # rounded inputs, so every variant starts from the same saved state.
    o, lse = _forward64(q, k, v, bool(shape.get("causal", False)), shape.get("scale"))
    return tuple(t.to(device) for t in (q, k, v, o.to(dtype), lse.float(), do))


def flops(B: int, H: int, Sq: int, Sk: int, D: int, causal: bool = False, scale: float | None = None) -> float:
    f = 10.0 * B * H * Sq * Sk * D  # dV = P^T dO, dP = dO V^T, dS -> dQ = dS K, dK = dS^T Q, plus S = Q K^T again
    return f / 2 if causal else f


def nbytes(B: int, H: int, Sq: int, Sk: int, D: int, causal: bool = False, scale: float | None = None,
           dtype: torch.dtype = torch.float32) -> float:
    # Read q, o, do and write dq ([B,H,Sq,D] each); read k, v and write dk, dv ([B,H,Sk,D]); read lse (fp32).
    return (4 * Sq + 4 * Sk) * B * H * D * elem_size(dtype) + 4 * B * H * Sq


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # Gradients sum over Sq (dk, dv) or Sk (dq) products: allow a little more than the forward.
    return {torch.float32: (1e-4, 1e-4), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}[dtype]


_CPU_SHAPES = [{"B": 1, "H": 2, "Sq": s, "Sk": s, "D": d, "causal": c}
               for s, d in ((1, 16), (17, 16), (64, 32), (100, 16), (33, 64)) for c in (False, True)]
_CPU_SHAPES += [{"B": 2, "H": 1, "Sq": 17, "Sk": 40, "D": 32, "causal": False},
                {"B": 1, "H": 1, "Sq": 40, "Sk": 17, "D": 16, "causal": True}]

register_op(Op(
    name=OP,
    signature="attention_bwd(q[B,H,Sq,D], k[B,H,Sk,D], v[B,H,Sk,D], o[B,H,Sq,D], lse[B,H,Sq], do[B,H,Sq,D], "
              "causal=False, scale=None) -> (dq, dk, dv)",
    shape_keys=("B", "H", "Sq", "Sk", "D"),
    **contract(globals()),
    check_shapes=_CPU_SHAPES,
    call_kwargs=("causal", "scale"),
    flags={"causal": (False, True), "scale": (None, 0.3)},
    package="kernels.attention_bwd.variants",
    bench_shapes=BENCH_SHAPES,  # the forward's
    size_key=lambda s: s["Sq"],
    outputs=("dq", "dk", "dv"),
    dtype_of=lambda q, *rest: q.dtype,
    doc="Five matmuls per tile pair; P is rebuilt from q, k and the saved logsumexp instead of being stored.",
))


@register(OP, "torch_autograd", backend="torch",
          idea="Vendor baseline: SDPA forward re-run under autograd, then backward (so its time includes a forward).")
def torch_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                   do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    q_, k_, v_ = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out = torch.nn.functional.scaled_dot_product_attention(q_, k_, v_, is_causal=causal, scale=scale)
        return torch.autograd.grad(out, (q_, k_, v_), do)


def _flash_bwd(q, k, v, o, lse, do, causal, scale):
    if MODE == "gpu":
        # FlashAttention-2's backward as PyTorch exposes it: dense batch (no cu_seqlens), no dropout.
        none = torch.empty(0, dtype=torch.int32, device=q.device)
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            do, q, k, v, o, lse, none, none, q.shape[2], k.shape[2], 0.0, causal,
            torch.empty(0, dtype=torch.int64, device=q.device), torch.empty(0, dtype=torch.int64, device=q.device),
            scale=scale)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        do, q, k, v, o, lse, 0.0, causal, scale=scale)


@functools.cache
def _flash_probe(dtype: str, sq: int, sk: int, d: int, causal: bool) -> str | None:
    """Return None when torch's flash backward takes this problem here and gets it right, else why not."""
    if sq == 0 or sk == 0 or d == 0:  # an empty problem: torch_flash_bwd returns zero gradients without the kernel
        return None
    dev = torch.device("cuda" if MODE == "gpu" else "cpu")
    inputs = make({"B": 1, "H": 1, "Sq": sq, "Sk": sk, "D": d, "causal": causal}, getattr(torch, dtype), 0, dev)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _flash_bwd(*inputs, causal, None)
    except RuntimeError as e:
        return str(e).splitlines()[0]
    want = reference(*inputs, causal=causal)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    return None if err < 0.1 else f"its gradients differ from the reference by {err:.2g} here"


def _flash_supports(shape: dict) -> str | None:
    dt = "float16" if MODE == "gpu" else "float32"
    why = _flash_probe(dt, shape["Sq"], shape["Sk"], shape["D"], bool(shape.get("causal", False)))
    return None if why is None else f"{OP}/torch_flash_bwd: torch's flash backward does not take this problem: {why}"


@register(OP, "torch_flash_bwd", backend="torch", supports=_flash_supports,
          dtypes=("float16", "bfloat16") if MODE == "gpu" else ("float32", "float16", "bfloat16"),
          idea="Vendor baseline: PyTorch's FlashAttention-2 backward kernel alone, fed the saved O and logsumexp.")
def torch_flash_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    if q.numel() == 0 or k.numel() == 0:  # torch's CPU flash backward dies of SIGFPE on an empty batch or head dim
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)  # no rows or no keys: no gradient
    return tuple(_flash_bwd(q, k, v, o, lse, do, causal, scale))
