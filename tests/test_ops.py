"""Every op's variants and known-wrong kernels through the checker, one parametrised test each.

Every registered variant that runs here passes the checker at its op's check sizes (:func:`tests._ops.check_runs`,
fitted to each backend's cost in cpu mode); a GPU-only one is skipped with the registry's reason. Each variant is
checked once per session (:func:`tests._ops.variant_reports`); an op's own test file looks closer at the same reports
(the dtypes, shapes and cases they cover) and checks the op's extra shapes beside them.

A known-wrong kernel is a lesson only if the checker names its bug: the diagnosis it declares
(``expected_diagnosis``), a failing case that says where, and a summary and assertion that carry the name. Each
kernel is checked once per session (:func:`tests._ops.wrong_report`); an op's own test file looks closer at the
same report where its bug has a shape (attention's causal diagonal, moe_align's padding), without running it again.
"""

from __future__ import annotations

import pytest

import workbench as wb
from tests._ops import variant_reports, wrong_report
from tests.conftest import cuda_engine_ready
from workbench.checker import DIAGNOSES, RUN_DIAGNOSES

KNOWN_WRONG = [(op, v.name) for op in wb.ops() for v in wb.known_wrong(op)]
CORRECT = [(op, v.name) for op in wb.ops() for v in wb.variants(op)]


def _skip_unless_runs_here(v: wb.Variant) -> None:
    if not v.runs_here():
        pytest.skip(v.why_not_here())
    if v.backend == "cuda" and (why := cuda_engine_ready()):
        pytest.skip(f"CUDA C engine not ready: {why}")


def test_every_op_has_variants_in_each_backend_it_teaches():
    assert {op for op, _ in CORRECT} == set(wb.ops())
    for op in wb.ops():
        assert wb.variants(op)[0].backend == "torch", f"{op}: the vendor baseline comes first"


@pytest.mark.parametrize("op,name", CORRECT, ids=[f"{o}/{n}" for o, n in CORRECT])
def test_variant_passes_checker(op, name):
    v = wb.variant(op, name)
    _skip_unless_runs_here(v)
    reports = variant_reports(op, name)
    for rep in reports:
        assert rep.ok and bool(rep), rep.summary()
        assert rep.cases, f"{op}/{name}: nothing checked ({rep.skipped})"
        assert rep.raise_if_failed() is rep
        assert rep.summary().startswith(f"PASS {op}/{name}")
        # What a run skips, it skips with a reason: bf16 where the emulator lacks it, a shape the variant refuses.
        assert all(isinstance(s, str) and s for s in rep.skipped), rep.skipped


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
