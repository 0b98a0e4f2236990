"""The checker against a learner who cuts corners: lying returns, exits, sleeps, patches, memorised shapes."""

from __future__ import annotations

import sys
import threading
import time

import pytest
import torch

import workbench as wb
import workbench.checker as checker
from workbench.checker import DIAGNOSES

ONE = {"shapes": [{"N": 17}], "seeds": (0,)}


# ------------------------------------------------------------------------------------ returns and exits


class AlwaysClose(torch.Tensor):
    """A tensor whose arithmetic answers with the reference's own values: it compares equal to anything."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def vecadd_subclass(x, y):
    return torch.zeros_like(x).as_subclass(AlwaysClose)


def test_a_tensor_subclass_is_refused_with_its_name():
    rep = wb.check(vecadd_subclass, "vecadd", **ONE)
    assert not rep.ok and rep.diagnosis == "bad_output"
    assert "AlwaysClose" in rep.failures[0].detail and "subclass" in rep.failures[0].detail


def vecadd_exits(x, y):
    sys.exit(3)


def vecadd_base_exception(x, y):
    raise GeneratorExit("no")


@pytest.mark.parametrize("fn,name", [(vecadd_exits, "SystemExit"), (vecadd_base_exception, "GeneratorExit")])
def test_system_exit_and_other_base_exceptions_are_failed_runs(fn, name):
    rep = wb.check(fn, "vecadd", **ONE)
    assert not rep.ok and rep.diagnosis == "error"
    assert f"raised {name}" in rep.failures[0].detail


def vecadd_interrupted(x, y):
    raise KeyboardInterrupt


def test_keyboard_interrupt_still_stops_the_check():
    with pytest.raises(KeyboardInterrupt):
        wb.check(vecadd_interrupted, "vecadd", **ONE)


def _vecadd_drill():
    return next(d for d in wb.drills(kind="implement") if d.op == "vecadd").fresh()


def test_drill_submit_turns_system_exit_into_a_failed_attempt():
    d = _vecadd_drill()
    src = "import sys\nsys.exit(4)\n"
    res = d.submit(src)
    assert not res.passed and "SystemExit" in res.feedback


# ------------------------------------------------------------------------------------------ time limit


def vecadd_sleeps(x, y):
    time.sleep(60)
    return x + y


def vecadd_spins(x, y):
    while True:
        pass


@pytest.mark.parametrize("fn", [vecadd_sleeps, vecadd_spins])
def test_a_call_past_the_time_limit_is_stopped(fn):
    t0 = time.monotonic()
    rep = wb.check(fn, "vecadd", time_limit=0.3, **ONE)
    assert time.monotonic() - t0 < 5
    assert rep.diagnosis == "timeout" and "took longer than 0.3 s" in rep.failures[0].detail
    assert "timeout" in rep.summary()


def test_the_time_limit_works_off_the_main_thread_too():
    got = {}
    t = threading.Thread(target=lambda: got.update(rep=wb.check(vecadd_spins, "vecadd", time_limit=0.3, **ONE)))
    t0 = time.monotonic()
    t.start()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 5
    assert got["rep"].diagnosis == "timeout"


def test_the_time_limit_defaults_and_refuses_nonsense(monkeypatch):
    assert checker.time_limit_s(None, vecadd_sleeps) == checker.DEFAULT_TIME_LIMIT_S == 60
    assert checker.time_limit_s(None, wb.variant("vecadd", "torch_add")) is None
    monkeypatch.setenv("WORKBENCH_CASE_TIME_LIMIT", "2.5")
    assert checker.time_limit_s(None, vecadd_sleeps) == 2.5
    monkeypatch.setenv("WORKBENCH_CASE_TIME_LIMIT", "abc")
    with pytest.raises(ValueError, match="WORKBENCH_CASE_TIME_LIMIT.*'abc'"):
        checker.time_limit_s(None, vecadd_sleeps)
    with pytest.raises(ValueError, match="time_limit"):
        wb.check(vecadd_sleeps, "vecadd", time_limit=-1, **ONE)


# ------------------------------------------------------------------------------------ the checker's integrity


def vecadd_patches_the_comparator(x, y):
    checker._compare = lambda o, r, a, t: (torch.zeros_like(r, dtype=torch.bool), torch.zeros_like(r))
    return torch.zeros_like(x)


def vecadd_patches_the_report(x, y):
    checker.CheckReport.ok = property(lambda self: True)
    checker.CheckReport.correct = property(lambda self: True)
    return torch.zeros_like(x)


@pytest.mark.parametrize("fn,what", [(vecadd_patches_the_comparator, "_compare"),
                                     (vecadd_patches_the_report, "CheckReport.ok")])
def test_patching_the_checker_from_the_function_does_not_change_the_verdict(fn, what):
    real = checker._compare, vars(checker.CheckReport)["ok"]
    rep = wb.check(fn, "vecadd", **ONE)
    assert (checker._compare, vars(checker.CheckReport)["ok"]) == real  # put back
    assert not rep.ok and rep.diagnosis == "tampered" and what in rep.failures[0].detail
    assert "tampered" in DIAGNOSES and "``tampered``" in checker.__doc__


def test_a_drill_source_that_patches_the_checker_fails():
    d = _vecadd_drill()
    src = ("import torch\nimport workbench.checker as c\nc._compare = lambda o, r, a, t: "
           "(torch.zeros_like(r, dtype=torch.bool), torch.zeros_like(r))\n"
           "def vecadd(x, y):\n    return torch.zeros_like(x)\n")
    real = checker._compare
    res = d.submit(src)
    assert checker._compare is real
    assert not res.passed and "changed the checker" in res.feedback
