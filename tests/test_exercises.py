"""Exercises: the solution passes, the untouched starter fails helpfully, hints come one at a time."""

from __future__ import annotations

import contextlib
import io

import pytest

import workbench as wb
from workbench.drills import Exercise, load_function

IDS = wb.exercises()


def test_there_are_exercises():
    assert {"vecadd-triton", "vecadd-numba-grid"} <= set(IDS)


@pytest.mark.parametrize("ex_id", IDS)
def test_exercise_is_well_formed(ex_id):
    ex = wb.exercise(ex_id)
    assert isinstance(ex, Exercise) and ex.id == ex_id
    assert ex.op in wb.ops()
    assert ex.statement.strip() and ex.title.strip() and ex.hints
    assert ex.starter_file.is_file() and ex.solution_file.is_file()
    assert f"def {ex.entry}" in ex.starter
    md = ex._repr_markdown_()
    assert ex.entry in md and ex.starter in md


@pytest.mark.parametrize("ex_id", IDS)
def test_solution_passes(ex_id, capsys):
    ex = wb.exercise(ex_id)
    rep = ex.check(load_function(ex.solution_file, ex.entry))
    out = capsys.readouterr().out
    assert rep, rep.summary()
    assert out.startswith("Correct")


@pytest.fixture(scope="module")
def starter_runs():
    """Check each untouched starter once (the Numba simulator is slow): {id: (report, printed feedback)}."""
    runs = {}
    for ex_id in IDS:
        ex = wb.exercise(ex_id)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rep = ex.check(load_function(ex.starter_file, ex.entry))
        runs[ex_id] = (rep, buf.getvalue())
    return runs


@pytest.mark.parametrize("ex_id", IDS)
def test_untouched_starter_fails_helpfully(ex_id, starter_runs):
    rep, out = starter_runs[ex_id]
    assert not rep
    assert out.startswith(("Not yet", "Almost")), out
    # it says what is wrong: the diagnosis, or that nothing was written
    d = rep.diagnosis
    assert d is not None
    assert d in out or "wrote none" in out, out
    assert "ex.hint()" in out


def test_triton_starter_is_told_it_wrote_nothing(starter_runs):
    rep, out = starter_runs["vecadd-triton"]
    assert rep.diagnosis in ("unwritten", "unwritten_rows", "masking")
    assert out.startswith("Not yet: your kernel wrote none of the outputs")


def test_numba_starter_is_told_about_the_tail(starter_runs):
    rep, out = starter_runs["vecadd-numba-grid"]
    assert rep.diagnosis == "masking"
    assert out.startswith("Almost")  # small sizes fit one block and pass
    assert "masking" in out


@pytest.mark.parametrize("ex_id", IDS)
def test_hints_one_at_a_time_then_no_more(ex_id, capsys):
    ex = wb.exercise(ex_id)
    n = len(ex.hints)
    for i in range(1, n + 1):
        msg = ex.hint()
        assert msg.startswith(f"Hint {i}/{n}: ") and msg.endswith(ex.hints[i - 1])
        assert capsys.readouterr().out.strip() == msg
    for _ in range(2):
        msg = ex.hint()
        assert msg.startswith("No more hints") and f"({n} shown)" in msg
        assert "solution()" in msg
    # fetching the exercise again starts the hints over
    assert wb.exercise(ex_id).hint().startswith(f"Hint 1/{n}")


@pytest.mark.parametrize("ex_id", IDS)
def test_solution_returns_source(ex_id):
    ex = wb.exercise(ex_id)
    src = ex.solution()
    assert f"def {ex.entry}(" in src
    assert src == ex.solution_file.read_text()
    assert src != ex.starter


@pytest.mark.parametrize("ex_id", IDS)
def test_wrong_signature_names_the_expected_one(ex_id):
    ex = wb.exercise(ex_id)
    sig = wb.get_op(ex.op).signature.split(" ->")[0]

    def too_many(a, b, c, d, e, f, g, h, i):  # more required inputs than any op has (moe_fp8: 7)
        return a

    with pytest.raises(TypeError) as ei:
        ex.check(too_many)
    assert sig in str(ei.value) and "too_many(a, b, c, d, e, f, g, h, i)" in str(ei.value)
    with pytest.raises(TypeError, match="check\\(\\) takes your function"):
        ex.check("not a function")


def test_unknown_exercise_lists_known_ids():
    with pytest.raises(KeyError) as ei:
        wb.exercise("no-such-drill")
    msg = str(ei.value)
    assert "no-such-drill" in msg
    assert all(i in msg for i in IDS)


def test_load_function_missing_entry(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("def other():\n    return 1\n")
    with pytest.raises(NameError, match="does not define vecadd"):
        load_function(p, "vecadd")
