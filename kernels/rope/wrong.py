"""Known-wrong rope kernel: the Triton variant with its convention swapped.

``wrong_convention_swapped`` launches ``rope_kernel`` with a ``pair_offsets`` whose test is inverted: asked for
GPT-J pairs (interleaved=True) it rotates GPT-NeoX's (i, i + D/2), and the other way round. Angles, cos and sin are
right, so every output is a correct RoPE, of the other convention: a model trained with one and served with the
other loses its positions. (HF's Llama conversion script permutes the q and k projection weights for exactly this:
Meta's code rotates interleaved pairs, HF's rotate_half the two halves.)

What the checker says: ``rope_convention``: the op's ``explain`` (kernels/rope/reference.py) recomputes the other
convention and finds the output equal to it. With D = 2 (one pair) the two conventions coincide, and it passes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.rope.v1_triton import rope_triton
from workbench import register


@triton.jit
def pair_offsets_swapped(i, HALF: tl.constexpr, INTERLEAVED: tl.constexpr):
    if not INTERLEAVED:  # BUG: GPT-J's neighbours when NeoX's rotate-half is asked, and back
        first = 2 * i
        second = first + 1
    else:
        first = i
        second = i + HALF
    return first, second


@register("rope", "wrong_convention_swapped", backend="triton", expected_diagnosis="rope_convention",
          dtypes=("float32",),
          idea="KNOWN WRONG: GPT-J pairs (2i, 2i+1) when NeoX's (i, i+D/2) are asked for, and the other way round.")
def wrong_convention_swapped(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0,
                             interleaved: bool = False) -> torch.Tensor:
    return rope_triton(pair_offsets_swapped, x, positions, theta, interleaved)
