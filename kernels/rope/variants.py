"""Register the rope variants; ``LADDER`` is their teaching order.

The HF-style torch formula first (rotate_half: several elementwise kernels and the cos/sin tables in memory),
then one-pass kernels in Triton and CUDA C, the known-wrong kernel last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_triton,
    v2_cuda,
    wrong,  # wrong_convention_swapped: GPT-J pairs for NeoX and back
)

LADDER = ("torch_rotate_half", "triton", "cuda", "wrong_convention_swapped")
teaching_order("rope", LADDER)
