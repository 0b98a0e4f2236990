import torch
import triton
import triton.language as tl

from kernels.rope.v1_triton import rope_triton  # rope_kernel (which calls your helper) and its launch


@triton.jit
def pair_offsets(i, HALF: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Return the offsets (first, second) inside one head of D = 2 * HALF features of the pairs i [BLOCK_P]."""
    # >>> learner
    #> # Given: GPT-NeoX's rotate-half (interleaved=False) pairs feature i with its partner in the other half.
    #> first = i
    #> second = i + HALF
    #> # TODO: when INTERLEAVED (GPT-J), pair i is two neighbouring features instead. So far both conventions
    #> #       get NeoX's pairs.
    if INTERLEAVED:  # GPT-J: pair i is the neighbours 2i and 2i + 1
        first = 2 * i
        second = first + 1
    else:  # GPT-NeoX rotate-half: feature i and feature i + D/2
        first = i
        second = i + HALF
    # <<< learner
    return first, second


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0, interleaved: bool = False) -> torch.Tensor:
    return rope_triton(pair_offsets, x, positions, theta, interleaved)
