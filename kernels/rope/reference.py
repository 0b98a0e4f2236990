"""The rope contract: ``rope(x[B,S,H,D], positions[B,S] int32, theta=10000.0, interleaved=False) -> [B,S,H,D]``.

Feature pair i (0 <= i < D/2) of every head of token (b, s) is rotated by the angle ``positions[b, s] * inv_freq_i``,
``inv_freq_i = theta^(-2i/D)``: ``(a, b) -> (a cos - b sin, b cos + a sin)``. Which features form pair i is the
convention: ``interleaved=False`` is GPT-NeoX's rotate-half (features i and i + D/2: HF Llama, vLLM's
``is_neox_style=True``), ``interleaved=True`` GPT-J's (features 2i and 2i + 1). D must be even. The reference works
in float64 (angles, cos and sin); the output has x's dtype.

Tolerance. A kernel computes the angle in fp32: ``inv_freq`` rounded once (one rounding: 2^-24 relative) and the
product ``position * inv_freq`` rounded once more, so the angle is off by up to about 2 * 2^-24 * position radians
(measured: at most 1.2 * 2^-24 * position for D in {16, 64, 128}, theta in {1e4, 5e5}, positions up to 8192). A
rotation off by delta moves a pair (a, b) by delta * |(a, b)|. ``make`` draws positions below ``POS_MAX`` = 4096
and clamps x to [-4, 4] (|(a, b)| <= 4 sqrt 2), so every element is within ``ANGLE_ATOL`` = 2 * 2^-24 * 4096 *
4 sqrt 2 ~ 2.8e-3 of the float64 result from the angle alone: that is added to each dtype's rounding tolerance.
Positions past a few thousand need a larger bound: at position 131072 the same two roundings allow
2 * 2^-24 * 131072 ~ 1.6e-2 rad, more than bf16's own rounding of the output.

Input cases: ``random`` (positions drawn in [0, 512) per token, in no order: decode batches hold arbitrary
positions), ``large`` (positions in [POS_MAX - 512, POS_MAX)).
"""

from __future__ import annotations

import math

import torch

from workbench.contracts import elem_size, randn, require, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
THETA = 10000.0
POS_MAX = 4096  # positions make draws stay below this: the tolerance's angle bound depends on it
X_MAX = 4.0  # make clamps x to [-X_MAX, X_MAX]
ANGLE_ATOL = 2 * 2.0**-24 * POS_MAX * X_MAX * math.sqrt(2)  # fp32 angle error (rad) x the largest pair's norm


def validate(x: torch.Tensor, positions: torch.Tensor, theta: float = THETA, interleaved: bool = False) -> dict:
    """Check the inputs of rope and return the shape {B, S, H, D}."""
    require_tensor("rope", "x", x, 4, DTYPES, "[B,S,H,D]")
    require_tensor("rope", "positions", positions, 2, (torch.int32,), "[B,S]")
    b, s, h, d = x.shape
    require("rope", tuple(positions.shape) == (b, s),
            f"positions must be [B,S] = [{b}, {s}] (one position per token of x), got {list(positions.shape)}")
    require("rope", d % 2 == 0, f"the head dim D must be even (RoPE rotates pairs of features), got D={d}")
    require("rope", isinstance(theta, (int, float)) and theta > 0, f"theta must be a positive number, got {theta!r}")
    require("rope", isinstance(interleaved, bool), f"interleaved must be True or False, got {interleaved!r}")
    return {"B": b, "S": s, "H": h, "D": d}


def pair_index(d: int, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the feature indices (first, second) of each of the D/2 pairs under a convention."""
    i = torch.arange(d // 2)
    return (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float, interleaved: bool) -> torch.Tensor:
    """Return x rotated pair by pair in float64 under the given convention (no input checks)."""
    d = x.shape[-1]
    inv_freq = theta ** (-torch.arange(d // 2, dtype=torch.float64, device=x.device) * 2 / d)
    ang = positions.double()[..., None, None] * inv_freq  # [B, S, 1, D/2]
    cos, sin = ang.cos(), ang.sin()
    xd = x.double()
    first, second = pair_index(d, interleaved)
    a, b = xd[..., first], xd[..., second]
    out = torch.empty_like(xd)
    out[..., first] = a * cos - b * sin
    out[..., second] = b * cos + a * sin
    return out


def reference(x: torch.Tensor, positions: torch.Tensor, theta: float = THETA,
              interleaved: bool = False) -> torch.Tensor:
    """Rotate every pair of features by position * theta^(-2i/D), in float64."""
    validate(x, positions, theta, interleaved)
    return rotate(x, positions, theta, interleaved)


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'rope_convention' when the output is the other convention's rotation (NeoX for GPT-J or back)."""
    from workbench.checker import close_to

    x, positions = inputs[:2]
    other = not bool(kw.get("interleaved", False))
    if x.shape[-1] < 4:  # D = 2: one pair, the same under both conventions
        return None
    return "rope_convention" if close_to(outs[0], rotate(x, positions, kw.get("theta", THETA), other), atol,
                                         rtol) else None


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    b, s, h, d = (sizes[k] for k in ("B", "S", "H", "D"))
    x = randn((b, s, h, d), torch.float32, g, torch.device("cpu")).clamp_(-X_MAX, X_MAX)
    lo = POS_MAX - 512 if case == "large" else 0
    positions = torch.randint(lo, lo + 512, (b, s), generator=g, dtype=torch.int32)
    return x.to(dtype).to(device), positions.to(device)


def nbytes(B: int, S: int, H: int, D: int, theta: float = THETA, interleaved: bool = False,  # noqa: N803
           dtype: torch.dtype = torch.float32) -> float:
    # x read once, the output written once, one int32 position per token.
    return 2 * B * S * H * D * elem_size(dtype) + 4 * B * S


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    atol, rtol = {torch.float32: (1e-6, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]
    return atol + ANGLE_ATOL, rtol


OP = register_op(Op(
    name="rope",
    signature="rope(x[B,S,H,D], positions[B,S] int32, theta=10000.0, interleaved=False) -> [B,S,H,D]",
    shape_keys=("B", "S", "H", "D"),
    **contract(globals()),
    flops=lambda B, S, H, D, theta=THETA, interleaved=False: 3 * B * S * H * D,  # 2 mul + 1 add per element
    # D = 2 (one pair), D/2 odd (6, 126), D = 64 and 128 (Llama's), ragged S and H; both conventions.
    check_shapes=[{"B": 1, "S": 1, "H": 1, "D": 2, "interleaved": False},
                  {"B": 2, "S": 3, "H": 5, "D": 6, "interleaved": True},
                  {"B": 1, "S": 17, "H": 3, "D": 64, "interleaved": False},
                  {"B": 2, "S": 5, "H": 4, "D": 128, "interleaved": True},
                  {"B": 1, "S": 7, "H": 2, "D": 126, "interleaved": False},
                  {"B": 3, "S": 4, "H": 2, "D": 40, "interleaved": True}],
    call_kwargs=("theta", "interleaved"),
    flags={"interleaved": (False, True), "theta": (THETA, 500000.0)},
    cases=("random", "large"),
    package="kernels.rope.variants",
    bench_shapes={"gpu": [{"B": 1, "S": s, "H": 32, "D": 128} for s in (1024, 4096, 16384)],
                  "quick": [{"B": 1, "S": 4096, "H": 32, "D": 128}], "cpu": [{"B": 1, "S": 8, "H": 4, "D": 64}]},
    size_key=lambda s: s["B"] * s["S"],
    dtype_of=lambda x, *rest: x.dtype,
    doc="Rotate feature pairs by position-dependent angles; 3 FLOPs per element, read x once and write it once: "
        "memory-bound, and usually fused into the QKV projection's epilogue.",
))


@register("rope", "torch_rotate_half", backend="torch",
          idea="HF-style torch: inv_freq and cos/sin in fp32, x * cos + rotate_half(x) * sin (reshaped for GPT-J).")
def torch_rotate_half(x: torch.Tensor, positions: torch.Tensor, theta: float = THETA,
                      interleaved: bool = False) -> torch.Tensor:
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=x.device).float() / d))
    freqs = positions.float()[..., None] * inv_freq  # [B, S, D/2]
    if interleaved:  # GPT-J: each frequency twice in a row, pairs (2i, 2i+1)
        emb = freqs.repeat_interleave(2, dim=-1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
    else:  # NeoX rotate-half: the frequencies twice over, pairs (i, i + D/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        rot = torch.cat((-x2, x1), dim=-1)
    cos, sin = emb.cos()[:, :, None, :].to(x.dtype), emb.sin()[:, :, None, :].to(x.dtype)
    return x * cos + rot * sin
