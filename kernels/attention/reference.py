"""The attention contract, ``torch.nn.functional.scaled_dot_product_attention`` semantics.

``attention(q[B,H,Sq,D], k[B,H,Sk,D], v[B,H,Sk,D], causal=False, scale=None) -> [B,H,Sq,D]``

- ``scale`` defaults to ``1/sqrt(D)``.
- ``causal=True`` is SDPA's ``is_causal``: query i sees keys j <= i, aligned at the top-left corner even when
  Sq != Sk (the mask is ``ones(Sq, Sk).tril(0)``), so every query row sees at least key 0.
- FLOPs follow the FlashAttention papers: 4*B*H*Sq*Sk*D for the two matmuls, halved when causal.
- NaN inputs propagate as in torch: a NaN in query row i makes output row i NaN; a NaN in key j makes every row
  that sees key j NaN; a NaN in v[j, d] makes column d NaN in the rows that see key j. Whether a NaN at a key a row
  does not see leaks into that row is left free (torch's math backend leaks it through its additive mask and
  0 * NaN, its flash kernels skip masked tiles), so the ``nan`` case puts its key and value NaNs at key 0, which
  every row sees. Empty B, H, Sq or Sk give
  an empty (or, for Sk = 0, zero) output; D must be >= 1.
- Input cases: ``random``; ``nan`` (q[0,0,0,0], k[-1,-1,0,0], v[0,0,0,D-1] are
  NaN), run by default on the four small D = 16 shapes only (the emulated kernels are slow).
"""

from __future__ import annotations

import math

import torch

from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
             scale: float | None = None) -> dict:
    """Check the inputs of attention and return the shape {B, H, Sq, Sk, D}."""
    require_tensor("attention", "q", q, 4, DTYPES, "[B,H,Sq,D]")
    require_tensor("attention", "k", k, 4, DTYPES, "[B,H,Sk,D]")
    require_tensor("attention", "v", v, 4, DTYPES, "[B,H,Sk,D]")
    require_same_dtype("attention", q=q, k=k, v=v)
    b, h, sq, d = q.shape
    require("attention", tuple(k.shape) == (b, h, k.shape[2], d),
            f"k must be [B,H,Sk,D] = [{b},{h},Sk,{d}] to match q {tuple(q.shape)}, got {tuple(k.shape)}")
    require("attention", tuple(v.shape) == tuple(k.shape),
            f"v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    require("attention", d >= 1, f"the head dimension D must be >= 1, got q {tuple(q.shape)}")
    require("attention", isinstance(causal, bool), f"causal must be a bool, got {causal!r}")
    require("attention", scale is None or (isinstance(scale, (int, float)) and math.isfinite(scale)),
            f"scale must be None or a finite float, got {scale!r}")
    return {"B": b, "H": h, "Sq": sq, "Sk": k.shape[2], "D": d}


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    """Materialize S = scale * q k^T in float64, mask, softmax and multiply by v."""
    shape = validate(q, k, v, causal, scale)
    scale = 1.0 / math.sqrt(shape["D"]) if scale is None else scale
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(shape["Sq"], shape["Sk"], dtype=torch.bool, device=q.device).tril(0)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v.double()


TILES = (16, 32, 64, 128)  # key / query tile sizes a kernel might use, for recognising its mistakes


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, keep: torch.Tensor) -> torch.Tensor:
    """Return softmax(scale q k^T masked to ``keep`` [Sq, Sk]) v in float64 (a row that keeps no key is NaN)."""
    s = (q.double() @ k.double().transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v.double()


def _online_without_rescale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, keep: torch.Tensor,
                            tile: int, rescale_l: bool, rescale_acc: bool) -> torch.Tensor:
    """Return FlashAttention's forward over key tiles of ``tile`` with l_i and/or acc left unrescaled (float64)."""
    s = (q.double() @ k.double().transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    m = torch.full(s.shape[:-1], float("-inf"), dtype=torch.float64)
    l_i = torch.zeros(s.shape[:-1], dtype=torch.float64)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), dtype=torch.float64)
    for j0 in range(0, s.shape[-1], tile):
        st = s[..., j0:j0 + tile]
        m_new = torch.maximum(m, st.amax(dim=-1))
        p = torch.exp(st - m_new[..., None])
        alpha = torch.exp(m - m_new)
        l_i = (l_i * alpha if rescale_l else l_i) + p.sum(dim=-1)
        acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ v.double()[..., j0:j0 + tile, :]
        m = m_new
    return acc / l_i[..., None]


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Name attention's classic mistakes by recomputing them: the causal diagonal tile, the online rescale."""
    from workbench.checker import close_to

    q, k, v = inputs[:3]
    out, causal = outs[0], bool(kw.get("causal", False))
    sq, sk, d = q.shape[2], k.shape[2], q.shape[3]
    scale = kw.get("scale") or 1.0 / math.sqrt(d)
    i, j = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
    keep = j <= i if causal else torch.ones(sq, sk, dtype=torch.bool)
    if causal:  # off by one either way; the diagonal tile unmasked inside; the loop stopping before the diagonal tile
        wrongs = [j <= i + 1, j < i] + [w for t in TILES for w in (j < (i // t + 1) * t, j < (i // t) * t)]
        for wrong in wrongs:
            if close_to(out, _attend(q, k, v, scale, wrong), atol, rtol):
                return "causal_diagonal"
    for t in (t for t in TILES if t < sk):  # one key tile: nothing to rescale
        for rescale_l, rescale_acc in ((True, False), (False, True), (False, False)):
            if close_to(out, _online_without_rescale(q, k, v, scale, keep, t, rescale_l, rescale_acc), atol, rtol):
                return "online_rescale"
    return None


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    b, h, sq, sk, d = (sizes[k] for k in ("B", "H", "Sq", "Sk", "D"))
    q, k, v = (randn(s, torch.float32, g, torch.device("cpu")) for s in ((b, h, sq, d), (b, h, sk, d), (b, h, sk, d)))
    if case == "nan" and q.numel() and k.numel():
        q[0, 0, 0, 0] = float("nan")  # output row 0 of (batch 0, head 0)
        k[-1, -1, 0, 0] = float("nan")  # every row of the last (batch, head): all see key 0
        v[0, 0, 0, d - 1] = float("nan")  # column D-1 of every row: all see key 0 (causal too; 0 * NaN is NaN)
    return tuple(t.to(dtype).to(device) for t in (q, k, v))


def flops(B: int, H: int, Sq: int, Sk: int, D: int, causal: bool = False, scale: float | None = None) -> float:
    f = 4.0 * B * H * Sq * Sk * D
    return f / 2 if causal else f


def nbytes(B: int, H: int, Sq: int, Sk: int, D: int, causal: bool = False, scale: float | None = None,
           dtype: torch.dtype = torch.float32) -> float:
    # q and o are [B,H,Sq,D], k and v [B,H,Sk,D]: the O(N) traffic of a fused kernel.
    return (2 * Sq + 2 * Sk) * B * H * D * elem_size(dtype)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


_CPU_SHAPES = []
for _s in (1, 17, 64, 100):
    for _d in (16, 32, 64):
        _CPU_SHAPES.append({"B": 1, "H": 2, "Sq": _s, "Sk": _s, "D": _d, "causal": False})
_CPU_SHAPES = [s for s in _CPU_SHAPES if s["Sq"] * s["D"] <= 64 * 32]  # keep emulation cheap
_CPU_SHAPES += [{"B": 2, "H": 1, "Sq": 17, "Sk": 17, "D": 16, "causal": True},
                {"B": 1, "H": 1, "Sq": 64, "Sk": 64, "D": 32, "causal": True},
                {"B": 1, "H": 2, "Sq": 17, "Sk": 33, "D": 16, "causal": False},
                {"B": 1, "H": 1, "Sq": 33, "Sk": 17, "D": 16, "causal": True}]

# Benchmarks: 16k tokens per batch at each sequence length (FlashAttention-2's sweep), head dim 128; attention_bwd
# benchmarks at the same shapes.
BENCH_SHAPES = {"gpu": [{"B": 16384 // s, "H": 16, "Sq": s, "Sk": s, "D": 128, "causal": False}
                        for s in (512, 1024, 2048, 4096, 8192, 16384)],
                "quick": [{"B": 4, "H": 16, "Sq": 4096, "Sk": 4096, "D": 128, "causal": False}],
                "cpu": [{"B": 1, "H": 2, "Sq": 64, "Sk": 64, "D": 32, "causal": False}]}

OP = register_op(Op(
    name="attention",
    signature="attention(q[B,H,Sq,D], k[B,H,Sk,D], v[B,H,Sk,D], causal=False, scale=None) -> [B,H,Sq,D]",
    shape_keys=("B", "H", "Sq", "Sk", "D"),
    **contract(globals()),
    check_shapes=_CPU_SHAPES,
    call_kwargs=("causal", "scale"),
    flags={"causal": (False, True), "scale": (None, 0.3)},
    specials=("nan",),
    package="kernels.attention.variants",
    cases=("random", "nan"),
    case_shapes={"nan": lambda s: s["D"] == 16 and 1 < s["Sq"] * s["Sk"] <= 17 * 40},
    bench_shapes=BENCH_SHAPES,
    size_key=lambda s: s["Sq"],
    doc="Two matmuls around a row softmax; standard attention writes the SxS matrix to memory, flash does not.",
))


@register("attention", "torch_sdpa", backend="torch",
          idea="Vendor baseline: F.scaled_dot_product_attention (PyTorch picks flash/efficient/cuDNN/math).")
def torch_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
               scale: float | None = None) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
