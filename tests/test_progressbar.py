"""Progress bars: when they show, what they say (done/total, the case running, an ETA), and the CLI's live notes."""

from __future__ import annotations

import re
import time

import pytest

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench import progressbar as progress
from workbench.checker import CheckReport


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)


def test_option_beats_environment(monkeypatch):
    monkeypatch.setenv(progress.ENV, "0")
    assert progress.enabled(True) is True
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled(False) is False


@pytest.mark.parametrize(("value", "expected"), [("0", False), ("off", False), ("1", True), ("yes", True)])
def test_environment_decides_when_no_option(monkeypatch, value, expected):
    monkeypatch.setenv(progress.ENV, value)
    assert progress.enabled() is expected


def test_quiet_under_pytest_by_default(no_env, monkeypatch):
    assert "PYTEST_CURRENT_TEST" in __import__("os").environ
    assert progress.enabled() is False
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(progress, "_in_notebook", lambda: True)  # a Jupyter kernel outside pytest/nbval
    assert progress.enabled() is True


def test_bad_environment_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(progress.ENV, "maybe")
    with pytest.raises(ValueError, match=r"WORKBENCH_PROGRESS='maybe': expected 1 .* or 0"):
        progress.enabled()


def _slow_add(first_s: float, then_s: float):
    """Return a correct vecadd that sleeps ``first_s`` on its first call and ``then_s`` on later ones."""
    calls = []

    def slow_add(x, y):
        time.sleep(first_s if not calls else then_s)
        calls.append(1)
        return x + y

    return slow_add


def test_check_shows_cases_done_the_running_case_and_eta(capsys):
    shapes = [{"N": 17}, {"N": 1025}]
    rep = wb.check(_slow_add(1.2, 0.2), "vecadd", shapes=shapes, seeds=(0, 1), progress=True)
    assert rep.ok and len(rep.cases) == 4
    frames = capsys.readouterr().err.replace("\r", "\n")
    assert "check vecadd/slow_add" in frames
    # shown while the first (slow) case still runs, naming it
    assert re.search(r"0/4 \[[^\]]*float32 N=17 random seed 0\]", frames), frames
    assert re.search(r"3/4 \[[^\]]*float32 N=1025 random seed 1\]", frames), frames
    assert re.search(r"\d/4 \[\d\d:\d\d<\d\d:\d\d", frames), f"no elapsed<ETA in the bar:\n{frames}"


def test_quick_work_and_progress_off_stay_silent(capsys, monkeypatch):
    v = wb.variant("vecadd", "torch_add")
    wb.check(v, shapes=[{"N": 17}], dtypes=["float32"], progress=True)  # done well under DELAY_S: no bar
    assert capsys.readouterr().err == ""
    slow = _slow_add(0.7, 0.0)
    wb.check(slow, "vecadd", shapes=[{"N": 17}], progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(progress.ENV, "0")
    wb.check(_slow_add(0.7, 0.0), "vecadd", shapes=[{"N": 17}])
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(progress.ENV, "1")
    wb.check(_slow_add(0.7, 0.0), "vecadd", shapes=[{"N": 17}])
    assert "check vecadd/slow_add" in capsys.readouterr().err


@requires_cpu_mode
def test_emulated_bench_shows_its_timing_calls(capsys):
    rec = wb.bench(_slow_add(0.8, 0.2), "vecadd", N=64, reps=3, check=False, progress=True)
    assert rec["emulated"]
    frames = capsys.readouterr().err.replace("\r", "\n")
    assert "time vecadd/slow_add (emulated)" in frames
    assert re.search(r"0/4 \[[^\]]*warm-up\]", frames), frames
    assert re.search(r"3/4 \[[^\]]*rep 3/3\]", frames), frames


def test_bench_cli_prints_each_note_before_the_next_check_starts(capsys, monkeypatch):
    """Notes come out as they happen (a learner watching a long cpu-mode run sees them), under a bar of the steps."""
    from workbench import __main__ as cli

    def fake_check(v, dtypes, quick, progress=None):
        print(f"CHECK {v.name} {dtypes[0]}")
        time.sleep(0.1)  # the whole run lasts > DELAY_S, so its bar shows
        return CheckReport(op=v.op, name=v.name, cases=[_passing_case(dtypes[0])])

    def fake_bench(v, dtype, check, command, progress=None, **shape):
        return {"op": v.op, "variant": v.name, "dtype": str(dtype).replace("torch.", ""), "time_ms": 1.0,
                "tflops": None}

    monkeypatch.setattr("workbench.checker.check", fake_check)
    monkeypatch.setattr("workbench.timer.bench", fake_bench)
    records, notes = cli.run_bench("vecadd", quick=False, out=None, command="test", progress=True)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    checked = [n for n in notes if n.startswith("checked ")]
    assert len(checked) >= 3, notes
    for n in checked:  # "checked vecadd/numba_grid float32: ..." prints right after its own check, before any other
        name, dt = re.match(r"checked vecadd/(\S+) (\S+):", n).groups()
        i = lines.index(n)
        assert lines[i - 1] == f"CHECK {name} torch.{dt}", lines[i - 2:i + 1]
    total = sum(len(v.dtypes) for v in wb.variants("vecadd"))
    assert re.search(rf"bench: 100%.*{total}/{total}", captured.err.replace("\r", "\n")), captured.err


def _passing_case(dt):
    from workbench.checker import CaseResult

    return CaseResult(shape={"N": 1}, dtype=str(dt).replace("torch.", ""), seed=0, case="random", ok=True)
