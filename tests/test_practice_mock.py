"""The mock interview: dealt by weakness, every attempt on the sheet, a follow-up after the implement item, feedback
per topic and a next session, one display of the sheet. Cheap: napkin drills, and implement drills graded by a
stand-in (the real checker's runs are covered by the implement drills' own tests)."""

from __future__ import annotations

import random

import pytest

import workbench as wb
from workbench.practice import catalogue, mock_interview
from workbench.practice import mock as M
from workbench.practice import store as S
from workbench.practice.base import Grade
from workbench.practice.implement import ImplementDrill
from workbench.practice.summary import progress


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    S._pending.clear()
    yield tmp_path
    S._pending.clear()


@pytest.fixture
def fake_implement(monkeypatch):
    """Grade implement drills without running the checker: the answer 'good' passes; record the check's options."""
    seen = []

    def grade(self, answer):
        seen.append((self.id, self._check_kw()))
        ok = answer == "good"
        return Grade(ok, "Correct: all runs match." if ok else "Not yet: 3 of 10 runs are wrong.\n\nFirst failure: x",
                     "fake")

    monkeypatch.setattr(ImplementDrill, "_grade", grade)
    return seen


def key(d):
    return d.compute().value


def _napkins(topic):
    return [d for d in catalogue().values() if d.kind == "napkin" and d.topic == topic]


def test_the_deal_puts_weak_topics_and_drills_to_redo_first():
    a = wb.drill("attention-napkin-scores")
    a.submit(key(a) * 3)  # attention: a failed napkin
    for d in _napkins("gemm"):
        d.fresh().submit(key(d))  # gemm: every napkin passed cleanly
    pool = [d for d in catalogue().values() if d.topic in ("attention", "gemm")]
    items = M.deal(pool, random.Random(0), progress(catalogue(), exercises=False))
    napkin = next(d for d in items if d.kind == "napkin")
    assert napkin.id == "attention-napkin-scores"  # the one to redo, in the weakest topic
    assert all(d.topic == "attention" for d in items)  # gemm is mastered: dealt only when nothing else is left
    gemm = [d for d in pool if d.topic == "gemm"]
    only_napkins = [d for d in gemm if d.kind == "napkin"] + [next(d for d in gemm if d.kind == k)
                                                             for k in ("spot_the_bug", "implement")]
    dealt = M.deal(only_napkins, random.Random(0), progress(catalogue(), exercises=False))
    assert [d.kind for d in dealt] == ["napkin", "napkin", "spot_the_bug", "implement"]  # clean passes: nothing else


def test_topic_order_is_weak_then_unpractised_then_mastered():
    a = wb.drill("attention-napkin-scores")
    a.submit(key(a) * 3)
    g = wb.drill("gemm-napkin-intensity")
    g.submit(key(g))
    order = M.topic_order(progress(catalogue(), exercises=False))
    assert order["attention"] == 0 and order["gemm"] == len(order) - 1


def test_every_attempt_is_kept_and_the_implement_item_gets_a_follow_up(fake_implement):
    ids = ["gemm-napkin-intensity", "gemm-napkin-ridge", "vecadd-bug-triton-mask", "softmax-implement-cuda-row"]
    m = mock_interview(minutes=30, drills=ids)
    n = m.current
    assert not m.submit(key(n) * 2).passed and m.current is n  # a wrong first answer stays on the item
    assert m.submit(key(n)).passed
    n2 = m.current
    assert m.submit(key(n2)).passed
    m.give_up()  # the spot-the-bug item
    impl = m.current
    assert not m.submit("bad").passed
    res = m.submit("good")
    fu = m.current
    assert res.passed and fu.id.startswith("softmax-implement-cuda-row+") and "Follow-up to item 4" in res.follow_up
    options = {f.key: f for f in M.follow_ups(impl)}
    change = options[fu.id.split("+", 1)[1]]
    kw = fu._check_kw()
    assert kw != impl._check_kw() and (change.dtypes is None or kw["dtypes"] == list(change.dtypes))
    assert m.submit("good").passed and m.current is None
    assert progress(catalogue(), exercises=False).statuses[impl.id].follow_ups == {change.key: True}
    sheet = m._sheet
    rows = {i.drill: i for i in sheet.items}
    assert rows["gemm-napkin-intensity"].tries == "2 (1 wrong)" and rows["gemm-napkin-intensity"].passed
    assert "factor of 2" in rows["gemm-napkin-intensity"].wrong[0]
    assert rows[fu.id].kind == "follow-up" and rows[fu.id].outcome == "pass"
    assert [i.outcome for i in sheet.items] == ["pass", "pass", "gave up", "pass", "pass"]
    attempts = [(e["drill"], e["passed"]) for e in S.events() if e["event"] == "attempt" and e["mock"] == m.id]
    assert attempts[:2] == [("gemm-napkin-intensity", 0), ("gemm-napkin-intensity", 1)]
    assert (fu.id, 1) in attempts and ("softmax-implement-cuda-row", 0) in attempts
    fb = sheet.topic_feedback()
    assert set(fb) == {d.topic for d in m.items}
    assert "passed on attempt 2" in fb["gemm"] and "gave up without an answer" in fb["memory"]
    nxt = sheet.next_session()
    assert "wb.drill('gemm-napkin-intensity')" in nxt and "wb.mock_interview(" in nxt
    assert "Feedback" in sheet.markdown() and "Next session" in sheet._repr_html_()


def test_every_implement_drill_has_a_follow_up_that_changes_the_check():
    for d in catalogue().values():
        if d.kind != "implement":
            continue
        options = M.follow_ups(d)
        assert options, f"{d.id} has no follow-up"
        for f in options:
            assert f.apply(d)._check_kw() != d._check_kw(), f"{d.id}: follow-up {f.key} changes nothing"


def test_a_self_assessed_item_closes_without_a_pass():
    m = mock_interview(minutes=30, drills=["gemm-napkin-intensity", "gemm-napkin-ridge", "vecadd-bug-triton-mask",
                                          "vecadd-implement-cuda"])
    m.current._self_assessed(0.75, "rubric 3/4")
    assert m.current.id == "gemm-napkin-ridge"
    sheet = m.finish()
    assert sheet.items[0].outcome == "self-assessed 75%" and not sheet.items[0].passed


def test_finish_shows_the_sheet_once_in_a_notebook(monkeypatch):
    import IPython
    import IPython.display

    shown = []

    class Shell:
        execution_count = 7

    shell = Shell()
    monkeypatch.setattr(M, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    m = mock_interview(minutes=30, drills=["gemm-napkin-intensity", "gemm-napkin-ridge", "vecadd-bug-triton-mask",
                                          "vecadd-implement-cuda"])
    sheet = m.finish()
    sheet._ipython_display_()  # what Jupyter does with the cell's value: the same cell, so nothing more
    assert len(shown) == 1
    shell.execution_count = 8
    sheet._ipython_display_()  # a later cell that shows the sheet again
    assert len(shown) == 2


def test_a_follow_up_not_passed_is_a_next_step():
    from types import SimpleNamespace

    fu = SimpleNamespace(id="vecadd-implement-cuda+float16", kind="implement", topic="memory", level="easy")
    S.record(fu, "attempt", passed=False)
    p = progress(catalogue(), exercises=False)
    assert p.statuses["vecadd-implement-cuda"].follow_ups == {"float16": False}
    assert any("Follow-up not passed yet: vecadd-implement-cuda under float16" in s for s in p.next_steps())


def test_finish_prints_once_in_a_script_and_leaves_the_echo_to_a_plain_prompt(monkeypatch, capsys):
    import sys

    ids = ["gemm-napkin-intensity", "gemm-napkin-ridge", "vecadd-bug-triton-mask", "vecadd-implement-cuda"]
    monkeypatch.setattr(M, "_cell", lambda: None)  # no IPython
    monkeypatch.delattr(sys, "ps1", raising=False)
    mock_interview(minutes=30, drills=ids).finish()
    assert capsys.readouterr().out.count("mock interview") == 1  # a script: printed once
    monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)
    sheet = mock_interview(minutes=30, drills=ids).finish()
    assert capsys.readouterr().out == "" and "mock interview" in repr(sheet)  # the prompt echoes it once


def test_a_pass_after_a_reveal_or_over_time_is_marked_on_the_sheet():
    wb.drill("gemm-napkin-intensity").reveal()  # before the interview
    m = mock_interview(minutes=30, drills=["gemm-napkin-intensity", "gemm-napkin-ridge", "vecadd-bug-triton-mask",
                                          "vecadd-implement-cuda"])
    assert m.submit(key(m.current)).passed
    m.start -= 31 * 60  # the clock ran out
    assert m.submit(key(m.current)).passed
    rows = m.finish().items
    assert [r.outcome for r in rows[:2]] == ["pass (answer seen before)", "pass (over time)"]
    assert not rows[0].passed and not rows[1].passed
    assert S.events()[-1]["over_time"] == 1


def test_a_profile_drill_can_be_the_second_question():
    ids = ["gemm-concept-smem-tiling", "gemm-profile-no-reuse", "vecadd-bug-triton-mask", "vecadd-implement-cuda"]
    assert [d.kind for d in mock_interview(minutes=30, drills=list(reversed(ids))).items] == [
        "concept", "profile", "spot_the_bug", "implement"]
    for d in _napkins("gemm"):
        d.fresh().submit(key(d))  # every gemm napkin passed cleanly: an unseen profile comes first
    items = M.deal([d for d in catalogue().values() if d.topic == "gemm"], random.Random(0),
                   progress(catalogue(), exercises=False))
    assert [d.kind for d in items] == ["concept", "profile", "spot_the_bug", "implement"]
