"""Exercises for a backend refuse answers whose work is not done by that backend; pinned flags are not probed."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from workbench.practice.learner_code import load_entry


def test_a_torch_answer_to_a_triton_exercise_fails(capsys):
    ex = wb.exercise("vecadd-triton")
    assert ex.backend == "triton" and "**The rule:**" in ex._repr_markdown_()

    def vecadd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y  # right, but no kernel

    r = ex.check(vecadd)
    assert not r.ok and r.diagnosis == "outside_backend"
    assert ex.check(load_entry(ex.solution_file, ex.entry)).ok


def test_a_no_op_launch_beside_torch_fails_a_cuda_exercise():
    ex = wb.exercise("transpose-coalesce")
    sol = load_entry(ex.solution_file, ex.entry)

    def transpose(x: torch.Tensor) -> torch.Tensor:
        sol(x)  # a real launch, whose result is thrown away
        return x.t().contiguous()  # torch does the work

    r = ex.check(transpose)
    assert not r.ok and r.diagnosis == "outside_backend", r.summary()


def test_flags_pinned_by_the_callers_shapes_are_not_probed():
    def attention(q, k, v, causal=False, scale=None):
        if causal:
            raise NotImplementedError("non-causal only")
        return wb.reference("attention")(q, k, v, causal=False, scale=scale).to(q.dtype)

    shapes = [{"B": 1, "H": 1, "Sq": 9, "Sk": 9, "D": 16, "causal": False}]
    assert wb.check(attention, "attention", shapes=shapes, seeds=(0,), fixed_flags=["causal"]).ok
    assert not wb.check(attention, "attention", shapes=shapes, seeds=(0,)).ok  # causal=True is probed and raises
    with pytest.raises(ValueError, match="not flags of attention"):
        wb.check(attention, "attention", shapes=shapes, fixed_flags=["causl"])
