"""One loader and one schema serve the exercises and the implement drills (workbench/practice/learner_code.py)."""

from __future__ import annotations

import inspect

import pytest

import workbench as wb
from workbench.checker import check
from workbench.practice import exercises, implement, learner_code, loading
from workbench.practice.base import DrillDataError
from workbench.practice.learner_code import CHECK_KEYS, SCHEMA, load_entry, parse_spec

EXERCISE = """[[exercise]]
id = "probe-exercise"
title = "t"
op = "vecadd"
solution = "none.py"
entry = "vecadd"
statement = "Write vecadd."
hints = ["h"]
backend = "cuda"
"""
DRILL = """chapter = "00-probe"
op = "vecadd"

[[drill]]
id = "probe-implement"
kind = "implement"
level = "easy"
topic = "memory"
title = "t"
model = "cuda_grid"
statement = "Write vecadd."
hints = ["h"]
backend = "cuda"
"""


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    """An exercise these tests register goes to a throwaway registry, never the one wb.exercises() lists."""
    monkeypatch.setattr(exercises, "_EXERCISES", {})


def _texts(extra: str, drop: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Return (file name, text) of an exercise and an implement drill with ``extra``'s keys in place of theirs."""
    keys = {ln.split(" = ")[0] for ln in extra.splitlines()} | set(drop)
    return [(name, "\n".join(ln for ln in text.splitlines() if ln.split(" = ")[0] not in keys) + "\n" + extra + "\n")
            for name, text in (("exercises.toml", EXERCISE), ("drills.toml", DRILL))]


def _load_both(tmp_path, extra: str) -> tuple:
    """Load an exercise and an implement drill holding ``extra`` (TOML lines); return both."""
    for name, text in _texts(extra):
        (tmp_path / name).write_text(text)
    return exercises.load_file(tmp_path / "exercises.toml")[0], loading.load_file(tmp_path / "drills.toml")[0]


def _refusals(tmp_path, extra: str, drop: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Return the messages an exercise and an implement drill holding ``extra`` are refused with, less the place."""
    out = []
    for name, text in _texts(extra, drop):
        (tmp_path / name).write_text(text)
        with pytest.raises(DrillDataError) as ei:
            (exercises.load_file if name == "exercises.toml" else loading.load_file)(tmp_path / name)
        msg = str(ei.value)
        assert msg.startswith(f"{tmp_path / name}: "), msg  # the message names the file and the table
        assert "exercise 'probe-exercise': " in msg or "drill 'probe-implement': " in msg, msg
        out.append(msg.split("': ", 1)[1])
    return tuple(out)


@pytest.mark.parametrize("extra, match", [
    ('budgets = { dram_bytes = "<= 1e6" }', "no profile metric named 'dram_bytes'"),
    ('budgets = { "global load efficiency" = 0.9 }', "must be a string such as"),
    ("budget_shape = { N = 64 }", "'budget_shape' says where budgets are measured, but there are no 'budgets'"),
    ('backend = "cupy"', "backend 'cupy' is not one of ['cuda', 'triton', 'numba']"),
    ('dtypes = ["float32", ""]', "every entry of 'dtypes' must be a non-empty string"),
    ("seeds = [0, 1.5]", "every entry of 'seeds' must be an integer"),
    ("shapes = [64]", "every entry of 'shapes' must be a table of sizes"),
    ("shapes = { N = 64 }", "'shapes' must be a list, got dict"),
    ('statement = "  "', "'statement' is empty"),
    ("hints = [1]", "every entry of 'hints' must be a non-empty string"),
])
def test_one_malformed_key_is_refused_with_one_message_in_an_exercise_and_a_drill(tmp_path, extra, match):
    ex_msg, drill_msg = _refusals(tmp_path, extra)
    assert ex_msg == drill_msg and match in ex_msg, (ex_msg, drill_msg)


def test_an_unknown_key_is_refused_alike_and_both_list_the_shared_keys(tmp_path):
    ex_msg, drill_msg = _refusals(tmp_path, "no_such_key = 1")
    for msg in (ex_msg, drill_msg):
        assert msg.startswith("unknown key 'no_such_key' (known: ["), msg
        assert all(repr(k) in msg for k in SCHEMA), msg
    assert _refusals(tmp_path, 'task = "Write vecadd."')[1].startswith("unknown key 'task'")  # a drill's old name


def test_a_missing_shared_key_is_named_alike(tmp_path):
    assert _refusals(tmp_path, "", drop=("statement",)) == ("missing key 'statement'",) * 2


def test_the_same_keys_give_the_same_checker_options(tmp_path):
    extra = ('shapes = [{ N = 17 }, { N = 1025 }]\ndtypes = ["float32"]\nseeds = [0]\ncases = ["random"]\n'
             'budgets = { "global load efficiency" = ">= 0.9" }\nbudget_shape = { N = 4096 }')
    ex, d = _load_both(tmp_path, extra)
    kw = {k: v for k, v in d._check_kw().items() if k != "runs_like"}
    assert ex.check_kw == {**kw, "dtypes": tuple(kw["dtypes"]), "shapes": tuple(kw["shapes"])}
    assert ex.check_kw["seeds"] == (0,) and ex.check_kw["cases"] == ("random",)  # TOML arrays become tuples
    assert (ex.statement, ex.hints, ex.backend) == (d.task, list(d.hints), d.backend)
    assert [str(b) for b in ex.budgets] == ["global load efficiency >= 90%"]
    assert "budgets, counted by `wb.profile` at N=4096" in d.statement()


def test_the_schema_s_checker_keys_are_keywords_wb_check_takes():
    kw_only = {p.name for p in inspect.signature(check).parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert set(CHECK_KEYS) <= kw_only and set(CHECK_KEYS) <= set(SCHEMA)
    assert implement.BACKENDS is learner_code.BACKENDS


def test_register_exercise_goes_through_the_schema_too():
    with pytest.raises(DrillDataError, match="unknown key 'quick'"):
        exercises.register_exercise("x", title="x", op="vecadd", statement="s", solution="s.py", entry="f",
                                    hints=["h"], here=__file__, quick=True)
    with pytest.raises(DrillDataError, match="missing key 'hints'"):
        exercises.register_exercise("x", title="x", op="vecadd", statement="s", solution="s.py", entry="f",
                                    here=__file__)
    with pytest.raises(DrillDataError, match="x: missing key 'statement'"):
        parse_spec("x", {})


# ------------------------------------------------------------------------------------------------------ loader
def test_one_loader_serves_both():
    assert exercises.load_entry is load_entry and implement.load_entry is load_entry
    assert not hasattr(implement, "load_source") and not hasattr(implement, "_TMP")


def test_the_loader_runs_a_file_or_source_text(tmp_path):
    p = tmp_path / "ex_twice_solution.py"
    p.write_text("def twice(x):\n    return 2 * x\n\n\nthrice = 3\n")
    assert load_entry(p, "twice")(3) == 6
    with pytest.raises(NameError, match=r"ex_twice_solution\.py does not define thrice\(\)"):  # not a function
        load_entry(p, "thrice")
    fn = load_entry(p.read_text(), "twice", "drill d")
    assert fn(4) == 8 and "return 2 * x" in inspect.getsource(fn)  # a real file: Triton reads kernels from it
    assert fn.__code__.co_filename.endswith("twice_answer.py") and fn.__module__ == "workbench_drill_answer_twice"
    with pytest.raises(NameError, match=r"^drill d: your source does not define twice\(\)$"):
        load_entry("y = 1\n", "twice", "drill d")


def test_a_drill_answer_without_the_function_is_refused_by_the_shared_loader():
    d = wb.drill("vecadd-implement-cuda")
    with pytest.raises(NameError, match=r"drill vecadd-implement-cuda: your source does not define vecadd\(\)"):
        d.submit("def other(x, y):\n    return x\n")
