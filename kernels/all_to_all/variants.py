"""Register the all_to_all variants; ``LADDER`` is their teaching order (torch's, pairwise, the reused buffer)."""

from workbench.registry import teaching_order

from . import v1_pairwise, wrong  # noqa: F401

LADDER = ("torch_all_to_all", "pairwise", "wrong_reused_buffer")
teaching_order("all_to_all", LADDER)
