"""Register the all_gather variants; ``LADDER`` is their teaching order (torch's, the ring, the missing own piece)."""

from workbench.registry import teaching_order

from . import v1_ring, wrong  # noqa: F401

LADDER = ("torch_all_gather", "ring", "wrong_own_piece_missing")
teaching_order("all_gather", LADDER)
