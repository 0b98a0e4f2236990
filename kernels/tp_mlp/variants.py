"""Register the tp_mlp variants; ``LADDER`` is their teaching order (Megatron's split, then the known-wrong one)."""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_megatron,
    wrong,  # wrong_no_all_reduce: each rank returns its partial sum
)

LADDER = ("megatron", "wrong_no_all_reduce")
teaching_order("tp_mlp", LADDER)
