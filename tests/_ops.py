"""Shared by the checker tests: the check shapes cheap enough to emulate, and one report per known-wrong kernel."""

from __future__ import annotations

import functools

import workbench as wb
from workbench.checker import CheckReport


def cost(op: str, shape: dict) -> int:
    """Return the product of ``shape``'s sizes along the op's shape keys (a proxy for emulation time)."""
    n = 1
    for k in wb.get_op(op).shape_keys:
        n *= int(shape.get(k, 1))
    return n


def cheap_shapes(op: str, limit: int = 300_000) -> list[dict]:
    """The op's check shapes minus the ones too slow to emulate here (gemm 127x65x129 in the interpreter).

    moe_fp8 keeps all of them (~1 s): its I = 136 shape is the only one that exposes wrong_up_scale_row.
    """
    shapes = wb.get_op(op).check_shapes
    return shapes if op == "moe_fp8" else [s for s in shapes if cost(op, s) <= limit]


@functools.cache
def wrong_report(op: str, name: str) -> CheckReport:
    """Check the known-wrong kernel ``op/name`` once per session: its first dtype, one seed, the cheap shapes.

    tests/test_ops.py asserts the diagnosis; an op's own test file may look closer at the same report.
    """
    v = wb.variant(op, name)
    return wb.check(v, dtypes=v.dtypes[:1], seeds=(0,), shapes=cheap_shapes(op))
