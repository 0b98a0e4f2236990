"""Every op's known-wrong kernels through the checker, one parametrised test: each is rejected with its diagnosis.

A known-wrong kernel is a lesson only if the checker names its bug: the diagnosis it declares
(``expected_diagnosis``), a failing case that says where, and a summary and assertion that carry the name. Each
kernel is checked once per session (:func:`tests._ops.wrong_report`); an op's own test file looks closer at the
same report where its bug has a shape (attention's causal diagonal, moe_align's padding), without running it again.
Each op's ladder of correct variants is checked in the op's own test file, at sizes fitted to each backend.
"""

from __future__ import annotations

import pytest

import workbench as wb
from tests._ops import wrong_report
from tests.conftest import cuda_engine_ready
from workbench.checker import DIAGNOSES, RUN_DIAGNOSES

KNOWN_WRONG = [(op, v.name) for op in wb.ops() for v in wb.known_wrong(op)]


# Ops that have no known-wrong kernel yet (transpose's lessons are about speed: its exercises have budgets).
WITHOUT_KNOWN_WRONG = {"transpose"}


def test_every_op_has_known_wrong_kernels_with_a_known_diagnosis():
    assert {op for op, _ in KNOWN_WRONG} == set(wb.ops()) - WITHOUT_KNOWN_WRONG
    for op, name in KNOWN_WRONG:
        v = wb.variant(op, name)
        assert v.known_wrong and v.expected_diagnosis in DIAGNOSES, f"{op}/{name}: {v.expected_diagnosis!r}"
        assert v.idea.startswith("KNOWN WRONG"), f"{op}/{name}: {v.idea!r}"


@pytest.mark.parametrize("op,name", KNOWN_WRONG, ids=[f"{o}/{n}" for o, n in KNOWN_WRONG])
def test_known_wrong_is_rejected_with_expected_diagnosis(op, name):
    v = wb.variant(op, name)
    if v.backend == "cuda" and (why := cuda_engine_ready()):
        pytest.skip(f"CUDA C engine not ready: {why}")
    rep = wrong_report(op, name)
    assert not rep.ok and not bool(rep)
    assert rep.diagnosis == v.expected_diagnosis, rep.summary()
    s = rep.summary()
    assert s.startswith(f"FAIL {op}/{name}") and v.expected_diagnosis in s
    for c in rep.failures:
        if c.diagnosis in RUN_DIAGNOSES:  # a sanitizer's finding or a mutated input: its message says where
            assert c.detail and c.diagnosis in c.line()
        else:
            assert c.n_mismatch > 0 and c.worst is not None and c.first_indices
    with pytest.raises(AssertionError, match=f"diagnosis: {v.expected_diagnosis}"):
        rep.raise_if_failed()
