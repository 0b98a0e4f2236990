"""The moe_fp8 contract: the moe layer with fp8 (e4m3) weights and activations, block-scaled as in DeepSeek-V3.

``moe_fp8(x[T,d], router_logits[T,E], w1q[E,2I,d], w1s[E,G(2I),G(d)], w2q[E,d,I], w2s[E,G(d),G(I)], top_k,
renormalize=True) -> [T,d]``, with ``G(n) = ceil(n / 128)``.

* Weights arrive quantized, as an fp8 checkpoint ships them: ``w1q``/``w2q`` are ``float8_e4m3fn`` and each 128x128
  block of an expert's matrix (rows x columns, the last ones ragged) has one float32 scale; the dequantized weight
  is ``wq[e, r, c] * ws[e, r // 128, c // 128]``. Rows 0..I-1 of w1 are the gate, I..2I-1 the up projection.
* Activations are quantized inside the op, per token and per group of 128 consecutive channels ("1x128"), with
  ``scale = max(amax, 1e-12) / 448`` and ``q = e4m3_rne(a / scale)`` (448 is e4m3's largest finite value, so the
  group's largest element lands on it). This happens twice: to x (in float32, which is exact to reproduce), and
  to the SwiGLU output ``silu(gate) * up`` before the down projection.
* Routing, SwiGLU and the weighted top-k combine are moe's (``kernels.moe.reference``). Output: x's dtype.
* Only ``x`` in bfloat16 is defined (the op's dtype); the router logits may be float32, float16 or bfloat16.

The reference runs this recipe with every GEMM in float64: x's quantization exactly as the contract states it
(float32), the SwiGLU output's in float64. A kernel that accumulates in float32 sees an intermediate that differs
by ~1e-7 relative, and a few elements in 10^5 then round to the neighbouring e4m3 value (1/16 of their size
away): the tolerance absorbs that, and not the error of skipping a quantization (``wrong.py``).

Why block scales: e4m3 is a float format, so even one scale per tensor gives every value its 3 mantissa bits,
until an outlier 10^4-10^5 times the typical value pushes the rest into e4m3's subnormals (notebook 04 measures
it); a 128x128 block's scale only answers to its own block. For a kernel the decisive property is locality: a
group's scale depends on 128 values one program already holds, so x and the SwiGLU output are quantized inside the
kernels that produce them (a per-tensor activation scale needs the whole tensor's amax first: another pass). With
K steps of 128 the scales are one multiply per K step and output element, on the accumulator, never per MAC.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.gemm_fp8.reference import E4M3_MAX, FP8  # one e4m3 dtype and max for both fp8 ops
from kernels.moe import reference as moe_ref
from workbench.contracts import elem_size, require, require_tensor
from workbench.registry import Op, contract, register, register_op

GROUP = 128  # quantization group: 128 channels of an activation row, 128x128 blocks of a weight matrix
SCALE_FLOOR = 1e-12  # an all-zero group still gets a finite, nonzero scale
LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def groups(n: int) -> int:
    """Return the number of 128-wide quantization groups along a dimension of size n (the last one ragged)."""
    return -(-n // GROUP)


def validate(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor, w2q: torch.Tensor,
             w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> dict:
    """Check the inputs of moe_fp8 and return the shape {T, d, I, E, top_k} (no device sync)."""
    require_tensor("moe_fp8", "x", x, 2, (torch.bfloat16,), "[T,d]")
    require_tensor("moe_fp8", "router_logits", router_logits, 2, LOGIT_DTYPES, "[T,E]")
    require_tensor("moe_fp8", "w1q", w1q, 3, (FP8,), "[E,2I,d]")
    require_tensor("moe_fp8", "w2q", w2q, 3, (FP8,), "[E,d,I]")
    require_tensor("moe_fp8", "w1s", w1s, 3, (torch.float32,), "[E,G(2I),G(d)]")
    require_tensor("moe_fp8", "w2s", w2s, 3, (torch.float32,), "[E,G(d),G(I)]")
    t, d, i, e = moe_ref.validate_expert_shapes("moe_fp8", x, w1q, w2q, "w1q", "w2q")
    for name, s, rows, cols in (("w1s", w1s, 2 * i, d), ("w2s", w2s, d, i)):
        want = (e, groups(rows), groups(cols))
        require("moe_fp8", tuple(s.shape) == want,
                f"{name} must hold one scale per 128x128 block, [E, ceil({rows}/128), ceil({cols}/128)] = "
                f"{list(want)}, got {list(s.shape)}")
    moe_ref.validate_routing("moe_fp8", router_logits, t, e, top_k, renormalize)
    return {"T": t, "d": d, "I": i, "E": e, "top_k": top_k}


# ------------------------------------------------------------------------------------------------- quantization
def quantize_groups(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (q[R,C] e4m3, scales[R,G(C)] in a's dtype) of a[R,C], one scale per row and 128-column group.

    The arithmetic runs in a's dtype: float32 is the contract's recipe for x, float64 the reference's for the SwiGLU
    output. ``to(float8_e4m3fn)`` rounds to nearest even; values are clamped to +-448 first (the cast does not
    saturate).
    """
    r, c = a.shape
    g = groups(c)
    pad = F.pad(a, (0, g * GROUP - c)).reshape(r, g, GROUP)
    scale = pad.abs().amax(dim=-1).clamp_min(SCALE_FLOOR) / E4M3_MAX  # [R, G]
    q = (pad / scale[..., None]).clamp(-E4M3_MAX, E4M3_MAX).to(FP8).reshape(r, g * GROUP)[:, :c]
    return q.contiguous(), scale


def dequantize_groups(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Return q * scale (broadcast over each row's 128-column groups) in ``dtype``."""
    c = q.shape[1]
    return q.to(dtype) * scale.to(dtype).repeat_interleave(GROUP, dim=1)[:, :c]


def quantize_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (q[E,R,C] e4m3, scales[E,G(R),G(C)] float32) of weights w[E,R,C], one scale per 128x128 block.

    Runs one expert at a time in float32 (a DeepSeek-V3 layer is 11 G weights: one expert's float32 copy is 176 MB).
    """
    e, r, c = w.shape
    gr, gc = groups(r), groups(c)
    q = torch.empty((e, r, c), dtype=FP8, device=w.device)
    s = torch.empty((e, gr, gc), dtype=torch.float32, device=w.device)
    for j in range(e):
        blk = F.pad(w[j].float(), (0, gc * GROUP - c, 0, gr * GROUP - r)).reshape(gr, GROUP, gc, GROUP)
        sj = blk.abs().amax(dim=(1, 3)).clamp_min(SCALE_FLOOR) / E4M3_MAX  # [gr, gc]
        qj = (blk / sj[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
        q[j] = qj.reshape(gr * GROUP, gc * GROUP)[:r, :c]
        s[j] = sj
    return q, s


def dequantize_blocks(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Return q * scale (each scale over its 128x128 block) in ``dtype``."""
    _, r, c = q.shape
    full = scale.to(dtype).repeat_interleave(GROUP, dim=1).repeat_interleave(GROUP, dim=2)[:, :r, :c]
    return q.to(dtype) * full


# -------------------------------------------------------------------------------------------------------- recipe
def _experts(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor, w2q: torch.Tensor,
             w2s: torch.Tensor, top_k: int, renormalize: bool, acc: torch.dtype,
             requant: bool = True) -> torch.Tensor:
    """Run the recipe with GEMMs and the SwiGLU output in ``acc`` (float64: reference, float32: torch baseline)."""
    i = w1q.shape[1] // 2
    w, ids = moe_ref.route(router_logits.to(acc), top_k, renormalize)
    xq, xs = quantize_groups(x.float())  # the contract's float32 recipe, whatever acc is
    xd = dequantize_groups(xq, xs, acc)
    out = torch.zeros(x.shape, dtype=acc, device=x.device)
    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        h = xd[tok] @ dequantize_blocks(w1q[e:e + 1], w1s[e:e + 1], acc)[0].T  # [n, 2I]
        a = F.silu(h[:, :i]) * h[:, i:]
        a = dequantize_groups(*quantize_groups(a), acc) if requant else a.to(x.dtype).to(acc)
        y = a @ dequantize_blocks(w2q[e:e + 1], w2s[e:e + 1], acc)[0].T  # [n, d]
        out.index_add_(0, tok, y * w[tok, slot, None].to(acc))
    return out


def reference(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor, w2q: torch.Tensor,
              w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> torch.Tensor:
    """Run the recipe in float64: route, quantize x (float32 recipe), dequantized GEMMs, requantize, combine."""
    validate(x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize)
    return _experts(x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize, torch.float64)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    # moe's inputs (same routing ladder and cases), its bf16 weights block-quantized as a checkpoint would be.
    x, logits, w1, w2, k = moe_ref.make(sizes, dtype, seed, device, case)
    w1q, w1s = quantize_blocks(w1)
    del w1
    w2q, w2s = quantize_blocks(w2)
    return x, logits, w1q, w1s, w2q, w2s, k


def nbytes(T: int, d: int, I: int, E: int, top_k: int, dtype: torch.dtype = torch.bfloat16) -> float:  # noqa: E741
    # x and out in dtype, logits, and the hit experts' e4m3 weights (1 B each) plus one fp32 scale per 128x128 block.
    hit = min(E, T * top_k)
    scales = hit * 4 * (groups(2 * I) * groups(d) + groups(d) * groups(I))
    return (2 * T * d + T * E) * elem_size(dtype) + hit * 3 * I * d + scales


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # Against the recipe in float64: the bf16 output rounding (2^-9 relative), float32 accumulation, and a rare
    # SwiGLU element that rounds to the other e4m3 neighbour (one term of the down GEMM's I-sum off by 1/16: at
    # I = 16, |out| ~ 0.5, that is ~0.008 absolute). Skipping the requantization costs ~3% of |out| on every element.
    return 1e-2, 1e-2


OP = register_op(Op(
    name="moe_fp8",
    signature=("moe_fp8(x[T,d], router_logits[T,E], w1q[E,2I,d], w1s[E,G(2I),G(d)], w2q[E,d,I], w2s[E,G(d),G(I)], "
               "top_k, renormalize=True) -> [T,d]"),
    shape_keys=("T", "d", "I", "E", "top_k"),
    **contract(globals()),
    flops=moe_ref.flops,
    check_shapes=[*moe_ref.OP.check_shapes,
                  {"T": 6, "d": 200, "I": 136, "E": 4, "top_k": 2}],  # two ragged 128-groups along d and along I
    dtypes=(torch.bfloat16,),
    call_kwargs=("renormalize",),
    flags={"renormalize": (True, False)},
    package="kernels.moe_fp8.variants",
    bench_shapes={"gpu": [moe_ref.model_shape(m, t) for m in moe_ref.MODELS for t in (1, 64, 4096)],
                  "quick": [moe_ref.model_shape("qwen3-30b-a3b", t) for t in (64, 1024)],
                  "cpu": [moe_ref.model_shape("mixtral-8x7b", 64, moe_ref.CPU_SCALE),
                          moe_ref.model_shape("deepseek-v3", 4, moe_ref.CPU_SCALE)]},
    size_key=lambda s: s["T"],
    cases=moe_ref.OP.cases,
    doc="moe with e4m3 weights (128x128 block scales) and activations (1x128 group scales): DeepSeek-V3's recipe.",
))


@register("moe_fp8", "torch_dequant", backend="torch",
          idea="Baseline: the recipe in torch, dequantized float32 GEMMs in a loop over experts (no fp8 math).")
def torch_dequant(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor,
                  w2q: torch.Tensor, w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> torch.Tensor:
    return _experts(x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize, torch.float32).to(x.dtype)
