"""RoPE in Triton: one program per token (b, s) rotates every head's pairs; the convention is a constexpr.

``pair_offsets`` says which two features of a head form pair i; ``rope_kernel`` calls it, so both conventions
share one kernel (and the exercise ``rope-pair-index`` writes that helper). The angle is position * inv_freq in
fp32; ``inv_freq`` (D/2 floats) is computed once per call on the host in float64 and rounded once, as HF and vLLM
precompute it, instead of an fp32 ``exp2`` per element (on a GPU ``tl.exp2`` is the approximate ex2 instruction).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels._triton_hooks import with_helpers
from workbench import empty_like, register


@triton.jit
def pair_offsets(i, HALF: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Return the feature offsets (first, second) of pairs i inside one head of 2 * HALF features."""
    if INTERLEAVED:  # GPT-J: neighbours (2i, 2i + 1)
        first = 2 * i
        second = first + 1
    else:  # GPT-NeoX rotate-half: feature i and its partner in the other half, i + D/2
        first = i
        second = i + HALF
    return first, second


@triton.jit
def rope_kernel(x_ptr, pos_ptr, inv_ptr, y_ptr, H, HALF: tl.constexpr, INTERLEAVED: tl.constexpr,
                BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)  # token b * S + s
    heads = tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_P)  # pair index, 0 .. D/2 - 1
    pos = tl.load(pos_ptr + tok).to(tl.float32)
    ang = pos * tl.load(inv_ptr + i, mask=i < HALF, other=0.0)  # [BLOCK_P]: one angle per pair, every head
    cos, sin = tl.cos(ang)[None, :], tl.sin(ang)[None, :]
    first, second = pair_offsets(i, HALF, INTERLEAVED)
    mask = (heads[:, None] < H) & (i[None, :] < HALF)
    row = tok * H * (2 * HALF) + heads[:, None] * (2 * HALF)  # each head's first feature
    a = tl.load(x_ptr + row + first[None, :], mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row + second[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + first[None, :], (a * cos - b * sin).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + row + second[None, :], (b * cos + a * sin).to(y_ptr.dtype.element_ty), mask=mask)


def inv_freq(d: int, theta: float, device: torch.device) -> torch.Tensor:
    """Return theta^(-2i/D) for i < D/2, computed in float64 and rounded once to float32."""
    return (theta ** (-torch.arange(d // 2, dtype=torch.float64) * 2 / d)).float().to(device)


def rope_triton(helper: Any, x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0,
                interleaved: bool = False) -> torch.Tensor:
    """Launch rope_kernel with ``helper`` as its pair_offsets, one program per token; return the rotated x."""
    kernel = rope_kernel if helper is pair_offsets else with_helpers(rope_kernel, "rope_triton", pair_offsets=helper)
    b, s, h, d = x.shape
    out = empty_like(x)
    if out.numel() == 0:
        return out
    kernel[(b * s,)](x, positions, inv_freq(d, theta, x.device), out, h, HALF=d // 2, INTERLEAVED=bool(interleaved),
                     BLOCK_H=triton.next_power_of_2(h), BLOCK_P=triton.next_power_of_2(d // 2), num_warps=4)
    return out


def _spec() -> dict:
    return triton_spec(rope_kernel, types={"pos_ptr": torch.int32, "inv_ptr": torch.float32}, HALF=64,
                       INTERLEAVED=False, BLOCK_H=32, BLOCK_P=64, num_warps=4, num_stages=1)


def _supports(shape: dict) -> str | None:
    if shape["H"] * shape["D"] > 2**16:
        return f"rope/triton keeps a token's heads in registers: H * D <= 65536, got {shape['H'] * shape['D']}"
    return None


@register("rope", "triton", backend="triton", inspect_spec=_spec, supports=_supports,
          idea="Triton: one program per token over all its heads; fp32 angles, pairs by a constexpr convention.")
def triton_rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0,
                interleaved: bool = False) -> torch.Tensor:
    return rope_triton(pair_offsets, x, positions, theta, interleaved)
