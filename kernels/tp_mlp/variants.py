"""Register the tp_mlp variants; ``LADDER`` is their teaching order (Megatron's split, in reference.py, then the
known-wrong one)."""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    wrong,  # wrong_no_all_reduce: each rank returns its partial sum
)

LADDER = ("megatron", "wrong_no_all_reduce")
teaching_order("tp_mlp", LADDER)
