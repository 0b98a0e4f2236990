"""Honest progress: reveals, model answers, over-time and self-assessed events; exercises in wb.progress(); napkin
slips and hints. Cheap: napkin and concept drills, and exercises checked against a stand-in checker."""

from __future__ import annotations

import re
import sqlite3

import pytest

import workbench as wb
from workbench.practice import catalogue
from workbench.practice import store as S
from workbench.practice.answers import fmt
from workbench.practice.napkin import likely_slip


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A throwaway progress folder per test; nothing waits in memory from another test."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    S._pending.clear()
    yield tmp_path
    S._pending.clear()


def napkin(drill_id: str = "gemm-napkin-intensity"):
    return wb.drill(drill_id)


def key(d):
    return d.compute().value


# ------------------------------------------------------------------------------------------------ the record


def test_a_learners_model_answer_is_a_reveal_and_the_pass_after_it_is_marked():
    d = napkin()
    value = d.model_answer()
    d.model_answer()  # once per handle
    assert d.submit(value).passed
    events = [(e["event"], e["answer"], e["revealed_before"]) for e in S.events()]
    assert events == [("reveal", "model_answer() called", 0), ("attempt", events[1][1], 1)]
    st = wb.progress().statuses[d.id]
    assert not st.passed and st.passed_after_reveal and st.state == "marked" and st.credit == 0.5
    d.reveal()  # reveal() records itself, once: its own call of model_answer is not a second reveal
    assert [e["event"] for e in S.events()].count("reveal") == 2


def test_model_answer_in_a_timed_attempt_gives_it_up_first():
    d = napkin().start(minutes=5)
    d.model_answer()
    assert [e["event"] for e in S.events()] == ["give_up", "reveal"] and not d.timed


def test_a_pass_over_time_is_marked_and_a_later_pass_in_time_is_clean():
    d = napkin().start(minutes=1)
    d._clock.start -= 120
    assert d.submit(key(d)).passed
    st = wb.progress().statuses[d.id]
    assert st.passed_over_time and not st.passed and st.mark() == "over time"
    assert napkin().submit(key(d)).passed
    assert wb.progress().statuses[d.id].passed


def test_a_self_assessment_is_recorded_with_its_score_and_is_never_a_pass():
    d = napkin("vecadd-napkin-time")
    d._self_assessed(0.5, "rubric 2/4: names the bytes, misses the write")
    (e,) = S.events()
    assert e["event"] == "self_assessed" and e["score"] == 0.5 and e["passed"] is None and "2/4" in e["answer"]
    p = wb.progress()
    st = p.statuses[d.id]
    assert st.self_scores == [0.5] and not st.passed and st.credit == 0 and st.state == "self-assessed"
    assert st in p.redo() and "self-assessed" in p.text()
    with pytest.raises(ValueError, match=r"share of the rubric met, a number in \[0, 1\]"):
        d._self_assessed(3)
    with pytest.raises(ValueError, match="never a pass or a fail"):
        S.record(d, "self_assessed", passed=True, score=1.0)


def test_a_version_1_file_migrates_to_version_2_with_every_row(home):
    db = home / "progress.sqlite3"
    con = sqlite3.connect(str(db))
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, drill TEXT NOT NULL,
            kind TEXT NOT NULL, topic TEXT NOT NULL, level TEXT NOT NULL,
            event TEXT NOT NULL CHECK (event IN ('attempt', 'reveal', 'give_up')), passed INTEGER, seconds REAL,
            hints INTEGER NOT NULL DEFAULT 0, timed INTEGER NOT NULL DEFAULT 0, over_time INTEGER NOT NULL DEFAULT 0,
            revealed_before INTEGER NOT NULL DEFAULT 0, mock TEXT, answer TEXT);
        CREATE INDEX events_drill ON events (drill);
        INSERT INTO meta VALUES ('schema_version', '1');
        INSERT INTO events (at, drill, kind, topic, level, event, passed) VALUES
            ('2026-01-01T00:00:00+00:00', 'gemm-napkin-intensity', 'napkin', 'gemm', 'easy', 'attempt', 1);
    """)
    con.commit()
    con.close()
    napkin()._self_assessed(1.0)  # the v1 CHECK would refuse this event: the write migrates first
    rows = S.events()
    assert [(r["event"], r["passed"], r["score"]) for r in rows] == [("attempt", 1, None), ("self_assessed", None, 1.0)]
    con = sqlite3.connect(str(db))
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
    assert {r[1] for r in con.execute("PRAGMA index_list(events)")} == {"events_drill"}
    con.close()


# ------------------------------------------------------------------------------------------------ exercises


class _Report:
    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def __bool__(self) -> bool:
        return self.ok


@pytest.fixture
def fake_checker(monkeypatch):
    """Stand in for the checker: an exercise's check passes when the function is named 'right'."""
    from workbench.practice import exercises as E

    monkeypatch.setattr(E, "check", lambda fn, op, **kw: _Report(fn.__name__ == "right"))
    monkeypatch.setattr(E.Exercise, "feedback", lambda self, r: "Correct." if r.ok else "Not yet: 3 of 9 wrong.")
    return E


def right(x, y):
    return x + y


def wrong(x, y):
    return x - y


def test_exercises_record_attempts_hints_and_solutions_and_appear_in_progress(fake_checker, capsys):
    ex = fake_checker.exercise("vecadd-numba-grid")
    assert not ex.check(wrong) and ex.check(right)
    ex.hint()
    ex.solution()
    ex.check(right)  # after the solution: marked
    rows = [(e["drill"], e["kind"], e["topic"], e["event"], e["passed"], e["hints"], e["revealed_before"])
            for e in S.events()]
    me = "exercise:vecadd-numba-grid"
    assert rows == [(me, "exercise", "memory", "attempt", 0, 0, 0), (me, "exercise", "memory", "attempt", 1, 0, 0),
                    (me, "exercise", "memory", "reveal", None, 1, 0), (me, "exercise", "memory", "attempt", 1, 1, 1)]
    assert all(e["seconds"] >= 0 for e in S.events() if e["event"] == "attempt")
    p = wb.progress()
    st = p.statuses[me]
    assert st.passed and st.failed == 1 and st.reveals == 1  # the clean pass came before the solution
    memory = next(t for t in p.topics if t.topic == "memory")
    assert memory.by_level["exercise"][0] == 1 and "exerc." in p.text()


def test_every_exercise_has_a_topic():
    from workbench.practice.exercises import _EXERCISES, _load_all
    from workbench.practice.summary import op_topic

    _load_all()
    assert {op_topic(e.op) for e in _EXERCISES.values()} <= set(wb.practice.TOPICS)
    assert op_topic("moe_topk") == "moe"
    with pytest.raises(KeyError, match="'nonesuch' has no practice topic"):
        op_topic("nonesuch")


# ------------------------------------------------------------------------------------------------ the summary


def test_progress_shows_mastery_and_what_to_do_next():
    a = wb.drill("attention-napkin-scores")
    a.submit(key(a) * 3)  # attention: failed
    g = napkin()
    g.submit(key(g))  # gemm: a clean pass
    v = napkin("vecadd-napkin-time")
    v.model_answer()
    v.submit(key(v))  # memory: passed only after a reveal
    p = wb.progress()
    lines = {t.topic: t for t in p.topics}
    assert lines["gemm"].mastery == 1 and lines["attention"].mastery == 0 and lines["memory"].mastery == 0.5
    assert lines["softmax"].mastery is None
    assert [t.topic for t in p.weakest(3)] == ["attention", "memory", "softmax"]  # then the unpractised
    assert p.weakest(len(p.topics))[-1].topic == "gemm"  # mastered: last
    steps = p.next_steps()
    assert steps[0].startswith("Weakest topic: attention")
    assert any("Redo attention-napkin-scores" in s and "failed 1x" in s for s in steps)
    assert any("Redo vecadd-napkin-time" in s and "after a reveal" in s for s in steps)
    assert any(s.startswith("Unseen in attention:") for s in steps)
    assert any("wb.mock_interview(topics=['attention', 'memory'])" in s for s in steps)
    text, page = p.text(), p.html()
    assert "mastery" in text and "next:" in text and "Redo attention-napkin-scores" in text
    assert "<th>mastery</th>" in page and "Redo vecadd-napkin-time" in page


# ------------------------------------------------------------------------------------------------ napkin drills


@pytest.mark.parametrize("ratio,label", [
    (1.024, "1024/1000"), (1.024 ** 2, "(1024/1000)^2"), (1.024 ** 3, "(1024/1000)^3"), (1 / 1.024, "1000/1024"),
    (1 / 1.024 ** 2, "(1000/1024)^2"), (1 / 1.024 ** 3, "(1000/1024)^3"), (8, "8"), (1 / 8, "1/8"), (2, "2"),
    (0.5, "1/2"), (1e3, "1,000"), (1e-3, "1/1,000"), (1e6, "1,000,000"), (1e-6, "1/1,000,000"),
    (8.2, "8"), (0.97e6, "1,000,000"), (1e3 * 1.024 ** 3, "1,000 x (1024/1000)^3")])
def test_known_slips_are_named_both_ways(ratio, label):
    assert " x ".join(s.label for s in likely_slip(ratio)) == label


@pytest.mark.parametrize("ratio", [3, 4, 0.7, 1.2, 37, 1.33])
def test_other_ratios_name_no_slip(ratio):
    assert likely_slip(ratio) is None


def test_only_the_slips_that_fit_the_unit_are_named():
    assert likely_slip(1 / 1.024, "waves") is None and likely_slip(1 / 1.024, "GiB")[0].label == "1000/1024"
    assert likely_slip(100, "%")[0].label == "100" and likely_slip(100, "us") is None
    assert likely_slip(1e3, "rows") is None and likely_slip(2, "rows")[0].label == "2"


def test_napkin_feedback_names_the_slip():
    d = wb.drill("attention-napkin-scores")  # in GiB
    gb = d.submit(key(d) * 2**30 / 1e9)
    assert not gb.passed and "(1024/1000)^3" in gb.feedback and "GiB" in gb.feedback
    bits = d.submit(key(d) * 8)
    assert "bits" in bits.feedback
    other = d.submit(key(d) * 3.3)
    assert "not a ratio a known slip explains" in other.feedback
    near = d.submit(key(d) * 1.024)  # within 5%, but exactly GB against GiB
    assert near.passed and "(1024/1000)^1" in near.feedback


def test_every_napkin_drill_has_hints_that_do_not_give_the_number():
    napkins = [d for d in catalogue().values() if d.kind == "napkin"]
    assert len(napkins) >= 25
    for d in napkins:
        assert d.hints, f"{d.id} has no hint"
        answer = fmt(d.compute().value)
        if len(answer.replace(",", "").replace(".", "")) >= 3:  # a 2 or a 32 also names an element size or a bank
            for h in d.hints:
                assert not re.search(rf"(?<![\d.,]){re.escape(answer)}(?![\d])", h), f"{d.id}: a hint gives {answer}"
