"""Register the reduce_scatter variants; ``LADDER`` is their teaching order (torch's, the ring, the wrong chunk)."""

from workbench.registry import teaching_order

from . import v1_ring, wrong  # noqa: F401

LADDER = ("torch_reduce_scatter", "ring", "wrong_returns_next_chunk")
teaching_order("reduce_scatter", LADDER)
