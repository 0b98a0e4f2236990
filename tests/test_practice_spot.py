"""Spot-the-bug drills that cannot be gamed: the key is code that must change, the feedback names no known-wrong
kernel and speaks in the listing's line numbers, a label is judged by the mistake it names.

The feedback tests reuse the one report per known-wrong kernel that tests/test_ops.py computes (tests/_ops.py), so
across the suite they run no kernel of their own; only the wrong-element table's rerun is left out of the loop
over every drill (tested once, on a cheap drill).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import workbench as wb
from tests._ops import wrong_report
from workbench.checker import DIAGNOSES
from workbench.practice import catalogue, spot
from workbench.practice import listing as L
from workbench.practice import store as progress_store
from workbench.practice.spot import DIAGNOSIS_MISTAKES, MISTAKES, BugAnswer, named_mistakes

SPOT = [d for d in catalogue().values() if d.kind == "spot_the_bug"]
IDS = [d.id for d in SPOT]
KNOWN_WRONG = [v for op in wb.ops() for v in wb.known_wrong(op)]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every attempt goes to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


def seeded(d, monkeypatch):
    """Give drill ``d`` the shared report of its kernel (computed once per test run) instead of its own check."""
    monkeypatch.setitem(spot._REPORTS, d._report_key(), wrong_report(d.op, d.variant))
    return d.fresh()


def leaks(d, text: str) -> list[str]:
    """Return what in ``text`` names a known-wrong kernel, its file, or a name the listing renames away."""
    found = [v.name for v in KNOWN_WRONG if re.search(rf"\b{re.escape(v.name)}\b", text)]
    files = {Path(v.source).name for v in KNOWN_WRONG} | {Path(v.cu_file).name for v in KNOWN_WRONG if v.cu_file}
    found += [f for f in files if f in text]
    found += [old for old in d.renames if re.search(rf"\b{re.escape(old)}\b", text)]
    found += re.findall(r"\S+\.(?:py|cu|cuh):\d+", text) + (["KNOWN WRONG"] if "KNOWN WRONG" in text else [])
    return found


def cited_lines(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\bline (\d+)", text)]


# ------------------------------------------------------------------------------------------------ the key
def test_the_key_never_holds_a_brace_a_blank_or_a_whitespace_change():
    wrong = ["for (k0 = 0; k0 + T <= K; k0 += T) {", "  load();", "  acc += dot();", "}", "", "store();"]
    fixed = ["for (k0 = 0; k0 < K; k0 += T) {", "  load();", "  __syncthreads();", "  acc += dot();",
             "  __syncthreads();", "}", "", "    store();"]
    # line 1 changed; the barriers go in around line 3 (lines 2, 3 and 3, 4: the brace does not count); line 6
    # only moved right
    assert L.answer_key(wrong, fixed) == [1, 2, 3]
    assert L.answer_key(["a = 1", "b = 2"], ["a = 1", "}", "b = 2"]) == []  # an inserted brace points nowhere
    assert all(L.is_trivial(s) for s in ("}", "{", "};", "", "   ", ")", "):"))
    assert not L.is_trivial("} else {") and not L.is_trivial("x = y[0]")


@pytest.mark.parametrize("d", SPOT, ids=IDS)
def test_every_key_line_is_code(d):
    lst = d.listing()
    assert d.key() and not [k for k in d.key() if L.is_trivial(lst.line(k))], (d.id, d.key())


def test_a_lone_brace_fails_and_a_brace_beside_the_bug_is_ignored(monkeypatch):
    d = seeded(wb.drill("gemm-bug-missing-syncthreads"), monkeypatch)
    lst, key = d.listing(), d.key()
    brace = next(n for n in range(key[-1], len(lst.lines) + 1) if lst.line(n).strip() == "}")
    res = d.submit(brace)
    assert not res.passed and "a blank line or a brace is never the bug" in res.feedback, res.feedback
    assert not d.submit(BugAnswer([brace], "race")).passed
    assert d.submit([key[0], brace]).passed  # the brace does not count either way


def fixed_with(d, fixes: tuple) -> bool:
    """Return whether the kernel's file with only ``fixes`` applied passes at the drill's witness."""
    try:
        fn = dataclasses.replace(d, fixes=fixes).materialize(True)
    except SyntaxError:
        return False  # the file does not even parse
    v = d.kernel
    return wb.check(fn, d.op, shapes=[dict(d.witness)], dtypes=v.dtypes[:1], seeds=(0,), quick=True,
                    probes=False).ok


MULTI = [d for d in SPOT if len(d.fixes) > 1]


@pytest.mark.parametrize("d", MULTI, ids=[d.id for d in MULTI])
def test_each_fix_of_a_drill_matters(d):
    """Every replacement is needed (left out, the kernel still fails) or is a whole fix by itself (either guard
    of softmax's empty rows): no key line is there only because the fix also touched it."""
    for i, fix in enumerate(d.fixes):
        needed = not fixed_with(d, d.fixes[:i] + d.fixes[i + 1:])
        assert needed or fixed_with(d, (fix,)), f"{d.id}: replacement {i + 1} ({fix.old!r}) changes nothing"


# ------------------------------------------------------------------------------------------------ labels
def exclusive_phrases(mistake: str) -> list[str]:
    """Return the phrases that name ``mistake`` and nothing else."""
    return [p for p in MISTAKES[mistake] if named_mistakes(p) == [{mistake}]]


@pytest.mark.parametrize("d", SPOT, ids=IDS)
def test_a_label_passes_when_it_names_the_kernels_mistake(d):
    words = {d.kernel.expected_diagnosis}
    assert d.label_ok(d.kernel.expected_diagnosis, words)  # the checker's own word
    mine = d.mistakes()
    synonyms = [p for m in mine for p in MISTAKES[m] if spot._words(p) != spot._words(d.kernel.expected_diagnosis)]
    assert synonyms and all(d.label_ok(p, words) for p in synonyms), d.id
    assert d.label_ok(synonyms[0].upper().replace(" ", "_"), words)  # case and separators do not matter
    said = {spot._words(w) for w in words}
    others = [m for m in MISTAKES if m not in mine and [p for p in exclusive_phrases(m) if spot._words(p) not in said]]
    for m in others:  # a label of a different mistake fails, alone or beside the right one
        wrong = next(p for p in exclusive_phrases(m) if spot._words(p) not in said)
        assert not d.label_ok(wrong, words), (d.id, wrong)
        assert not d.label_ok(f"{synonyms[0]} or {wrong}", words), (d.id, wrong)


def test_the_k_tail_drill_takes_masking_tail_bounds_and_the_checkers_scattered():
    d = wb.drill("gemm-bug-k-tail")
    said = {"k_tail", "scattered"}  # what the checker says for its runs (K = 129; K = 9 has no whole tile)
    for label in ("masking", "tail", "bounds", "out of bounds", "k_tail", "K tail", "scattered"):
        assert d.label_ok(label, said), label
    for label in ("race", "missing barrier", "precision", "overflow", "scattered or a race"):
        assert not d.label_ok(label, said), label
    assert not d.label_ok("scattered", {"k_tail"})  # scattered names no mistake: only the checker's word for a run


def test_two_races_are_told_apart_by_their_fix():
    """A missing barrier and a plain store where an atomic is needed are both races, and only that in common."""
    barrier, atomic = wb.drill("gemm-bug-missing-syncthreads"), wb.drill("moe-bug-combine-store")
    for d in (barrier, atomic):
        assert d.label_ok("race", {"race"}) and d.label_ok("race condition", {"race"})
    assert barrier.label_ok("missing __syncthreads()", {"race"}) and barrier.label_ok("missing_barrier", {"race"})
    assert not barrier.label_ok("needs an atomic add", {"race"})
    assert atomic.label_ok("needs an atomic add", {"race"})
    assert not atomic.label_ok("missing barrier", {"race"}) and not atomic.label_ok("missing_barrier", {"race"})


def test_every_diagnosis_and_kernel_has_its_mistakes():
    assert set(DIAGNOSIS_MISTAKES) <= set(DIAGNOSES)
    assert all(m in MISTAKES for ms in DIAGNOSIS_MISTAKES.values() for m in ms)
    assert all(m in MISTAKES for ms in spot.KERNEL_MISTAKES.values() for m in ms)
    names = {f"{v.op}/{v.name}" for v in KNOWN_WRONG}
    assert set(spot.KERNEL_MISTAKES) <= names
    assert all(d.mistakes() for d in SPOT)


def test_an_unknown_label_is_a_clear_error():
    d = wb.drill("vecadd-bug-triton-mask")
    with pytest.raises(ValueError, match="vecadd-bug-triton-mask.*names no mistake"):
        d.submit(BugAnswer(d.key(), "gremlins"))


# ------------------------------------------------------------------------------------------------ feedback
@pytest.mark.parametrize("d", SPOT, ids=IDS)
def test_feedback_never_names_a_known_wrong_kernel(d, monkeypatch):
    """A wrong line, a wrong label and the right answer: no registered name, file or hidden name in any reply."""
    d = seeded(d, monkeypatch)
    monkeypatch.setattr(type(d), "_samples", lambda self, case, n=4: [])  # the table's rerun: tested below
    lst, key = d.listing(), d.key()
    n = len(lst.lines)
    wrong_line = next(k for k in range(1, n + 1) if k not in key and not L.is_trivial(lst.line(k)))
    other = next(m for m in MISTAKES if m not in d.mistakes() and exclusive_phrases(m))
    for answer in (wrong_line, BugAnswer(key, exclusive_phrases(other)[0]), d.model_answer()):
        res = d.submit(answer)
        assert res.passed == (answer is not wrong_line and answer.diagnosis == d.kernel.expected_diagnosis)
        assert not leaks(d, res.feedback), (d.id, leaks(d, res.feedback), res.feedback)
        assert all(1 <= k <= n for k in cited_lines(res.feedback)), res.feedback
        assert "What this code does under the checker" in res.feedback


SANITIZED = [d for d in SPOT if d.kernel.expected_diagnosis in ("race", "out_of_bounds", "uninitialized")]


@pytest.mark.parametrize("d", SANITIZED, ids=[d.id for d in SANITIZED])
def test_a_sanitizer_finding_points_at_the_listings_lines(d, monkeypatch):
    """The checker's file:line becomes 'line N' of the listing, and those lines are the bug's."""
    d = seeded(d, monkeypatch)
    report = d.checker_report()
    assert re.search(r"\.(py|cu):\d+", report.telling_failure.detail)  # the raw message names the real file
    text = d.behaviour(report)
    lines = cited_lines(text)
    assert lines and set(lines) & set(d.key()), (d.id, lines, d.key(), text)


def test_wrong_elements_are_shown_with_what_was_expected(monkeypatch):
    d = seeded(wb.drill("vecadd-bug-triton-mask"), monkeypatch)
    case = d.checker_report().telling_failure
    rows = d._samples(case)
    assert rows and rows[0][0] == f"out[{case.worst['index'][0]}]" and rows[0][1] == "never written (poison)"
    res = d.submit(1)
    assert "| element | got | expected |" in res.feedback and "never written (poison)" in res.feedback
    assert "N=17: fails" in res.feedback and DIAGNOSES["masking"] in res.feedback


def test_a_mock_interview_shows_the_same_feedback(monkeypatch):
    from workbench.practice.mock import mock_interview

    ids = ["gemm-concept-smem-tiling", "gemm-napkin-intensity", "vecadd-bug-cuda-bounds", "vecadd-implement-cuda"]
    m = mock_interview(minutes=30, drills=ids)
    item = next(d for d in m.items if d.kind == "spot_the_bug")
    monkeypatch.setitem(spot._REPORTS, item._report_key(), wrong_report(item.op, item.variant))
    while m.current is not item:
        m.give_up()
    wrong_line = next(k for k in range(1, len(item.listing().lines) + 1) if k not in item.key())
    res = m.submit(wrong_line)
    assert not res.passed and "fine as written" in res.feedback
    assert not leaks(item, res.feedback + res.follow_up), res.feedback
    assert all(1 <= k <= len(item.listing().lines) for k in cited_lines(res.feedback))
