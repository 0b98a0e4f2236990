"""The drill API, timed drills, mock interviews and the progress store (SQLite under $WORKBENCH_HOME)."""

from __future__ import annotations

import sqlite3
import warnings

import pytest

import workbench as wb
from workbench.practice import BugAnswer, catalogue, mock_interview
from workbench.practice import store as S
from workbench.practice.summary import Progress


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A throwaway progress folder per test; nothing waits in memory from another test."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    S._pending.clear()
    yield tmp_path
    S._pending.clear()


def napkin():
    return wb.drill("gemm-napkin-intensity")


def key(d):
    """Return a napkin drill's answer without the record of a reveal (a learner's d.model_answer() is one)."""
    return d.compute().value


# ------------------------------------------------------------------------------------------------ the API


def test_the_lazy_table_exposes_the_drill_api():
    import workbench.practice as practice

    assert wb.drills is practice.drills and wb.drill is practice.drill
    assert wb.mock_interview is practice.mock_interview and wb.progress is practice.progress


def test_drills_filter_and_refuse_unknown_values():
    gemm = wb.drills(topic="gemm")
    assert gemm and all(d.topic == "gemm" for d in gemm)
    hard_spot = wb.drills(kind="spot_the_bug", level="hard")
    assert hard_spot and all(d.kind == "spot_the_bug" and d.level == "hard" for d in hard_spot)
    assert {d.chapter for d in wb.drills(chapter="01-gemm")} == {"01-gemm"}
    with pytest.raises(ValueError, match="unknown topic 'gemms'"):
        wb.drills(topic="gemms")
    with pytest.raises(ValueError, match="kinds are"):
        wb.drills(kind="quiz")
    assert "drill(s)" in repr(gemm) and "<table>" in gemm._repr_html_()


def test_drill_returns_a_fresh_handle_and_names_close_ids():
    a, b = wb.drill("vecadd-napkin-time"), wb.drill("vecadd-napkin-time")
    assert a is not b and a.id == b.id and a.kind == "napkin" and a.level in ("easy", "medium", "hard")
    with pytest.raises(KeyError, match="did you mean"):
        wb.drill("vecadd-napkin-tme")
    with pytest.raises(TypeError):
        wb.drill(3)


def test_show_renders_the_statement(capsys):
    wb.drill("vecadd-bug-triton-mask").show()
    out = capsys.readouterr().out
    assert "vecadd-bug-triton-mask" in out and " 1 | BLOCK = 256" in out and "mask = offs < n - 1" in out


def test_submit_returns_a_result_with_passed_and_feedback():
    d = napkin()
    res = d.submit(key(d))
    assert res.passed and bool(res) and "FLOP" in res.feedback and res.drill == d.id
    assert res.seconds is not None and not res.over_time
    bad = d.submit(key(d) * 3)
    assert not bad.passed and "3x the model answer" in bad.feedback
    with pytest.raises(TypeError, match="answer with a number"):
        d.submit("a lot")


def test_reveal_returns_the_kind_of_object_submit_takes_and_is_recorded():
    d = wb.drill("vecadd-bug-numba-grid")
    ans = d.reveal()
    assert isinstance(ans, BugAnswer) and ans.diagnosis == "masking"
    c = wb.drill("gemm-concept-splitk-determinism")
    assert c.reveal() == c.letter_of("The partial sums land")  # its letter in the current shuffle
    assert [e["event"] for e in S.events()] == ["reveal", "reveal"]


def test_hints_come_one_at_a_time():
    d = wb.drill("vecadd-implement-cuda")
    first, second = d.hint(), d.hint()
    assert first.startswith("Hint 1/") and second.startswith("Hint 2/")
    for _ in d.hints:
        last = d.hint()
    assert "No more hints" in last


def test_spot_the_bug_answers_with_lines_and_an_optional_diagnosis():
    d = wb.drill("rmsnorm-bug-mean-over-rows")
    key = d.model_answer()
    assert d.submit(BugAnswer(key.lines, "scale")).passed
    wrong_diag = d.submit(BugAnswer(key.lines, "masking"))
    assert not wrong_diag.passed and "The lines are right" in wrong_diag.feedback
    assert d.submit({"lines": list(key.lines)}).passed
    out = d.submit(999)
    assert not out.passed and "outside" in out.feedback
    with pytest.raises(ValueError, match="not one of the checker's"):
        d.submit(BugAnswer(key.lines, "gremlins"))
    with pytest.raises(TypeError, match="line number"):
        d.submit("line 6")


def test_concept_multiple_choice_shows_the_model_answer_after_an_attempt():
    d = wb.drill("gemm-concept-smem-tiling")
    right = d.letter_of("Each staged element")
    res = d.submit("a" if right != "a" else "b")
    assert not res.passed and f"The answer is **({right})**" in res.feedback
    again = d.submit(d.letter_of("Each staged element"))  # right (in the new order), but after the answer was shown
    assert again.passed
    with pytest.raises(ValueError, match="one letter"):
        d.submit("z")
    p = wb.progress()
    assert not p.statuses["gemm-concept-smem-tiling"].passed
    assert p.statuses["gemm-concept-smem-tiling"].passed_after_reveal


# ------------------------------------------------------------------------------------------------ timed drills


def test_timed_drill_locks_hints_until_give_up():
    d = napkin().start(minutes=20)
    assert d.timed and 0 < d.time_left <= 20 * 60
    assert "locked" in d.hint()
    d.give_up()
    assert d.hint().startswith("Hint 1/")
    events = S.events()
    assert events[-1]["event"] == "give_up" and events[-1]["timed"] == 1


def test_timed_drill_over_time_is_flagged():
    d = napkin().start(minutes=1)
    d._clock.start -= 120  # two minutes ago
    res = d.submit(key(d))
    assert res.passed and res.over_time and res.seconds >= 120
    assert S.events()[-1]["over_time"] == 1
    with pytest.raises(ValueError, match="minutes"):
        napkin().start(minutes=0)


# ------------------------------------------------------------------------------------------------ mock interviews


def test_mock_interview_deals_one_implement_one_spot_and_two_questions():
    m = mock_interview(minutes=45, seed=3)
    kinds = [d.kind for d in m.items]
    assert kinds.count("implement") == 1 and kinds.count("spot_the_bug") == 1
    assert kinds.count("concept") == 1 and kinds.count("napkin") + kinds.count("profile") == 1
    again = mock_interview(minutes=45, seed=3)
    assert [d.id for d in again.items] == [d.id for d in m.items]
    topical = mock_interview(minutes=30, topics=["softmax"], seed=1)
    assert {d.topic for d in topical.items} == {"softmax"}
    with pytest.raises(ValueError, match="unknown topic"):
        mock_interview(topics=["cooking"])
    with pytest.raises(ValueError, match="minutes"):
        mock_interview(minutes=0)


def test_mock_interview_locks_hints_advances_and_scores():
    ids = ["gemm-concept-smem-tiling", "gemm-napkin-intensity", "vecadd-bug-triton-mask", "vecadd-implement-cuda"]
    m = mock_interview(minutes=30, drills=ids)
    assert [d.id for d in m.items] == ids  # concept, napkin, spot, implement
    assert "locked" in m.hint()
    first = m.submit(m.current.letter_of("Each staged element"))
    assert first.passed and m.current.id == "gemm-napkin-intensity"
    assert "Item 2 of 4" in first.follow_up and "gemm-napkin-intensity" in first._repr_markdown_()
    n = m.current
    assert not m.submit(key(n) * 2).passed and m.current is n  # a fail stays on the item
    assert m.submit(key(n)).passed
    m.give_up()  # the spot-the-bug item
    assert m.current.kind == "implement" and "locked" in m.current.hint()
    assert m.items[2].hint().startswith("Hint 1/")  # the item given up has its hints back
    sheet = m.finish()
    assert [i.outcome for i in sheet.items] == ["pass", "pass", "gave up", "not reached"]
    assert sheet.passed == 2 and "2/4 passed" in sheet.text() and "<table>" in sheet._repr_html_()
    assert sheet.items[1].seconds is not None
    assert {e["mock"] for e in S.events()} == {m.id}
    with pytest.raises(RuntimeError, match="is over"):
        m.submit("b")


# ------------------------------------------------------------------------------------------------ progress


def test_progress_is_on_disk_and_counts_clean_passes(home):
    d = napkin()
    d.submit(key(d) * 2)
    d.submit(key(d))
    c = wb.drill("gemm-concept-smem-tiling")
    c.submit("a" if c.letter_of("Each staged element") != "a" else "b")  # a wrong letter
    assert S.pending() == 0  # everything reached the file: a kernel restart reads it back from there
    con = sqlite3.connect(str(home / "progress.sqlite3"))
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(S.SCHEMA_VERSION)
    rows = con.execute("SELECT drill, event, passed FROM events ORDER BY id").fetchall()
    con.close()
    assert rows == [("gemm-napkin-intensity", "attempt", 0), ("gemm-napkin-intensity", "attempt", 1),
                    ("gemm-concept-smem-tiling", "attempt", 0), ("gemm-concept-smem-tiling", "reveal", None)]
    p = wb.progress()
    assert p.statuses["gemm-napkin-intensity"].passed and p.statuses["gemm-napkin-intensity"].failed == 1
    assert p.statuses["gemm-concept-smem-tiling"].failed == 1


def test_progress_chart_text_and_weakest_topics():
    d = wb.drill("attention-concept-fa2")
    d.submit("a")  # a fail in attention
    g = napkin()
    g.submit(key(g))  # a pass in gemm
    p = wb.progress()
    assert isinstance(p, Progress) and p.passed == 1
    weakest = p.weakest(3)
    assert weakest[0].topic == "attention"  # the practised topic with no clean pass comes first
    fig = p.figure()
    assert len(fig.data) == 6 and sum(sum(t.y) for t in fig.data[:4]) == 1  # levels, exercises; marked; the rest
    text = p.text()
    assert "weakest topics:" in text and "attention" in text and "gemm" in text


def test_cli_progress_prints_the_table(home, capsys):
    from workbench.__main__ import main

    napkin().submit(1.0)
    assert main(["progress", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "topic" in out and "weakest topics:" in out and str(home) in out


def test_a_corrupt_database_gets_a_clear_message_and_is_left_untouched(home, capsys):
    from workbench.__main__ import main

    db = home / "progress.sqlite3"
    db.write_bytes(b"this is not a sqlite database, just some bytes " * 100)
    before = db.read_bytes()
    d = napkin()
    with pytest.warns(RuntimeWarning, match="not a readable SQLite database"):
        res = d.submit(key(d))
    assert res.passed  # the drill itself is unaffected
    assert S.pending() == 1 and db.read_bytes() == before
    with pytest.raises(S.ProgressStoreError, match="Move it aside"):
        S.events()
    assert main(["progress", "--home", str(home)]) == 1
    assert "not a readable SQLite database" in capsys.readouterr().err
    db.rename(home / "progress.sqlite3.broken")
    assert S.flush() and S.pending() == 0  # the waiting event reaches a fresh file
    assert [e["drill"] for e in S.events()] == [d.id]


def test_a_locked_database_loses_nothing(home, monkeypatch):
    monkeypatch.setattr(S, "LOCK_TIMEOUT_S", 0.05)
    d = napkin()
    d.submit(key(d))  # creates the file with one row
    con = sqlite3.connect(str(home / "progress.sqlite3"))
    con.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.warns(RuntimeWarning, match="locked"):
            d.submit(key(d) * 2)
        assert S.pending() == 1
    finally:
        con.rollback()
        con.close()
    d.submit(key(d))  # the next write carries the waiting one
    assert S.pending() == 0
    assert [e["passed"] for e in S.events()] == [1, 0, 1]


def test_a_newer_schema_is_refused_and_an_older_one_migrated(home, monkeypatch):
    d = napkin()
    d.submit(key(d))
    db = home / "progress.sqlite3"
    con = sqlite3.connect(str(db))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(S.ProgressStoreError, match="newer Kernel Workbench"):
        S.events()
    assert db.read_bytes() == before
    # back to the current version, then pretend this workbench is one newer with a migration that adds a column
    con = sqlite3.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(S.SCHEMA_VERSION),))
    con.commit()
    con.close()
    newer = S.SCHEMA_VERSION + 1
    monkeypatch.setitem(S.MIGRATIONS, S.SCHEMA_VERSION, lambda c: c.execute("ALTER TABLE events ADD COLUMN note TEXT"))
    monkeypatch.setattr(S, "SCHEMA_VERSION", newer)
    assert len(S.events()) == 1  # migrated, the row kept
    con = sqlite3.connect(str(db))
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(newer)
    assert "note" in [r[1] for r in con.execute("PRAGMA table_info(events)")]
    con.close()


def test_progress_of_nothing_yet_is_empty_not_an_error():
    p = wb.progress()
    assert p.passed == 0 and all(not t.tried for t in p.topics)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "not practised yet" in p.text()


# ------------------------------------------------------------------------------------------------ the browser


def test_browser_filters_and_its_chart_follows_the_dropdowns(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(getattr(obj, "data", obj)))
    box = wb.drills().browse()
    before = [list(t.y) for t in box.chart.data]
    n_all = len(box.choice.options)
    assert n_all == len(catalogue())
    box.topic.value = "attention"
    assert len(box.choice.options) == len(wb.drills(topic="attention"))
    assert [list(t.y) for t in box.chart.data] != before
    box.kind.value = "concept"
    assert all("concept" in label for label, _ in box.choice.options)
    d = box.chosen()
    assert d.kind == "concept" and d is box.chosen()  # one handle per selection: the one whose options are shown
    if d.form in ("choice", "select", "order"):  # the letters shown are the letters this handle grades
        assert d._listed() in shown[-1], shown[-1][:400]


# ------------------------------------------------------------------------------- the store against an untidy machine


def _hold_lock(home):
    con = sqlite3.connect(str(home / "progress.sqlite3"))
    con.execute("BEGIN EXCLUSIVE")
    return con


def test_events_queued_under_a_lock_are_journalled_at_exit_and_merged_later(home, monkeypatch, capsys):
    monkeypatch.setattr(S, "LOCK_TIMEOUT_S", 0.05)
    d = napkin()
    d.submit(key(d))  # the file exists with one row
    con = _hold_lock(home)
    try:
        with pytest.warns(RuntimeWarning, match="locked"):
            d.submit(key(d) * 2)
            d.submit(key(d) * 3)
        assert S.pending() == 2
        S.flush_at_exit()  # what atexit runs: the lock is still held, so the journal keeps them
        assert S.pending() == 0 and S.journal_path().is_file()
        assert "kept in" in capsys.readouterr().err
    finally:
        con.rollback()
        con.close()
    assert [e["passed"] for e in S.events()] == [1, 0, 0]  # the journal is read with the file
    assert S.journal_path().is_file()
    d.submit(key(d))  # the next write merges the journal
    assert not S.journal_path().exists()
    assert [e["passed"] for e in S.events()] == [1, 0, 0, 1]


def test_events_queued_under_a_lock_are_written_at_exit_once_it_is_free(home, monkeypatch):
    monkeypatch.setattr(S, "LOCK_TIMEOUT_S", 0.05)
    d = napkin()
    d.submit(key(d))
    con = _hold_lock(home)
    with pytest.warns(RuntimeWarning):
        d.submit(key(d) * 2)
    con.rollback()
    con.close()
    S.flush_at_exit()
    assert S.pending() == 0 and not S.journal_path().exists()
    assert [e["passed"] for e in S.events()] == [1, 0]


def test_a_read_only_home_is_named_as_read_only(home, monkeypatch):
    ro = home / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv("WORKBENCH_HOME", str(ro))
    try:
        import os

        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root): a read-only folder is still writable")
        with pytest.warns(RuntimeWarning, match=f"progress folder {ro} is read-only"):
            assert not napkin().submit(key(napkin()) * 2).passed
    finally:
        ro.chmod(0o700)


def test_the_store_says_read_only_when_the_folder_cannot_be_written(home, monkeypatch):
    monkeypatch.setattr(S.os, "access", lambda p, mode: False)  # what a read-only mount answers, even for root
    with pytest.warns(RuntimeWarning, match="is read-only: the database progress.sqlite3 cannot be created"):
        napkin().submit(1.0)
    assert S.pending() == 1


def test_a_home_that_is_a_file_is_named(home, monkeypatch):
    f = home / "afile"
    f.write_text("not a folder")
    monkeypatch.setenv("WORKBENCH_HOME", str(f / "sub"))
    with pytest.warns(RuntimeWarning, match=f"{f} is a file, not a folder"):
        napkin().submit(1.0)
    with pytest.raises(S.ProgressStoreError, match="is a file, not a folder"):
        S._connect(S.path())


@pytest.mark.parametrize("version,match", [("abc", "not a version number"), ("", "not a version number"),
                                           ("0", "which no Kernel Workbench wrote")])
def test_a_garbage_schema_version_is_a_clear_error_not_a_value_error(home, version, match):
    d = napkin()
    d.submit(key(d))
    con = sqlite3.connect(str(home / "progress.sqlite3"))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    con.commit()
    con.close()
    with pytest.warns(RuntimeWarning, match=match):
        res = d.submit(key(d))  # the drill still grades; the event waits
    assert res.passed and S.pending() == 1
    with pytest.raises(S.ProgressStoreError, match=match):
        S.events()
