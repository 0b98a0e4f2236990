"""The checker against a learner who cuts corners: lying returns, exits, sleeps, patches, memorised shapes."""

from __future__ import annotations

import ast
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


# ----------------------------------------------------------------------------------- probes: drawn shapes, repeats
CHECK_SIZES = {s["N"] for s in wb.get_op("vecadd").check_shapes}


def vecadd_memorised(x, y):
    return x + y if x.numel() in CHECK_SIZES else torch.zeros_like(x)


def test_a_function_right_only_at_the_public_shapes_fails_on_drawn_shapes():
    rep = wb.check(vecadd_memorised, "vecadd")
    assert all(c.ok for c in rep.cases) and not rep.ok  # every planned case passes; the probes do not
    drawn = [c for c in rep.failures if c.probe == "drawn"]
    assert drawn and all(c.shape["N"] not in CHECK_SIZES for c in drawn)
    assert f"seed={rep.seed}" in rep.summary() and "[drawn]" in rep.summary()


def test_the_seed_replays_the_drawn_shapes_and_differs_per_call():
    a = wb.check(vecadd_memorised, "vecadd", seed=1234)
    b = wb.check(vecadd_memorised, "vecadd", seed=1234)
    assert a.seed == b.seed == 1234
    drawn = [[c.shape for c in r.probes if c.probe == "drawn"] for r in (a, b)]
    assert drawn[0] == drawn[1] and drawn[0]
    seeds = {wb.check(vecadd_memorised, "vecadd", shapes=[{"N": 17}], seeds=(0,)).seed for _ in range(4)}
    assert len(seeds) > 1
    with pytest.raises(ValueError, match="seed"):
        wb.check(vecadd_memorised, "vecadd", seed=-1)


def test_drawn_shapes_stay_near_the_planned_sizes_and_cost():
    shapes = [{"M": 17, "N": 33, "K": 9}, {"M": 64, "N": 64, "K": 64}]
    rep = wb.check(lambda a, b: a @ b, "gemm", shapes=shapes, seeds=(0,), seed=7)
    drawn = [c.shape for c in rep.probes if c.probe == "drawn"]
    assert drawn and rep.ok
    for s in drawn:
        assert s not in shapes and s["M"] * s["N"] * s["K"] <= 2 * 17 * 33 * 9
        assert all(1 <= s[k] <= 64 for k in "MNK")


class Flaky:
    """Wrong on about 8% of calls (a seeded coin), right otherwise."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)

    def __call__(self, x, y):
        out = x + y
        if float(torch.rand((), generator=self.g)) < 0.08:
            out[0] += 1.0
        return out


def test_a_function_wrong_on_8_percent_of_calls_fails_every_time():
    reps = [wb.check(Flaky(s), "vecadd", seed=s) for s in range(10)]
    assert not any(r.ok for r in reps)
    assert any(c.diagnosis == "nondeterministic" for r in reps for c in r.runs)
    assert "nondeterministic" in DIAGNOSES and "``nondeterministic``" in checker.__doc__


def test_a_correct_function_is_repeated_and_passes():
    rep = wb.check(lambda x, y: x + y, "vecadd", shapes=[{"N": 17}], seeds=(0,))
    (rpt,) = [c for c in rep.probes if c.probe == "repeat"]
    assert rep.ok and rpt.ok and "repeats" in rpt.detail
    assert not wb.check(lambda x, y: x + y, "vecadd", shapes=[{"N": 17}], seeds=(0,), probes=False).probes


# ------------------------------------------------------------------------ flags, special values, index width


def moe_topk_always_renormalises(router_logits, top_k, renormalize=True):
    return wb.variant("moe_topk", "torch_topk").fn(router_logits, top_k, True)


def test_every_flag_value_is_checked_moe_topk_renormalize_false():
    rep = wb.check(moe_topk_always_renormalises, "moe_topk")
    assert all(c.ok for c in rep.cases)  # the plan only uses the default
    flag = [c for c in rep.failures if c.probe == "flag"]
    assert flag and flag[0].shape["renormalize"] is False and not rep.ok


def _flags(sig: str) -> list[str]:
    return [a.split("=")[0].strip() for a in checker._signature_args(sig) if "=" in a]


@pytest.mark.parametrize("op", wb.ops())
def test_every_flag_in_every_signature_is_declared_and_exercised(op):
    spec = wb.get_op(op)
    names = _flags(spec.signature)
    assert set(names) == set(spec.flags), f"{op}: signature flags {names}, declared {list(spec.flags)}"
    for flag, values in spec.flags.items():
        assert flag in spec.call_kwargs and len(values) >= 2
        default = spec.signature.split(f"{flag}=")[1].split(",")[0].split(")")[0]
        assert ast.literal_eval(default) == values[0], (op, flag, values[0], default)
    if not spec.flags:
        return
    runs = [c.shape for c in wb.check(wb.variants(op)[0], dtypes=spec.dtypes[:1], seeds=(0,),
                                      shapes=spec.check_shapes[:1]).runs]
    for flag, values in spec.flags.items():
        assert {checker._flag_value(spec, s, flag) for s in runs} >= set(values), (op, flag)


def gemm_zeroes_nan(a, b):
    return torch.nan_to_num(a @ b, nan=0.0, posinf=0.0, neginf=0.0)


def gemm_through_fp16(a, b):
    return (a.half() @ b.half()).float() if a.dtype == torch.float32 else a @ b


def softmax_inf_as_one_hot(x):
    out = torch.softmax(x.nan_to_num(posinf=1e30), dim=-1)
    return out


@pytest.mark.parametrize("fn,op", [(gemm_zeroes_nan, "gemm"), (gemm_through_fp16, "gemm"),
                                   (softmax_inf_as_one_hot, "softmax")])
def test_special_values_are_probed_where_the_op_defines_them(fn, op):
    spec = wb.get_op(op)
    shapes = [s for s in spec.check_shapes if all(v >= 3 for k, v in s.items() if k in spec.shape_keys)][:1]
    rep = wb.check(fn, op, shapes=shapes, seeds=(0,), cases=["random"])
    assert not rep.ok, rep.summary()
    if all(c.ok for c in rep.cases):  # the plan passed: a special-value probe is what fails it
        assert [c for c in rep.probes if c.probe == "special" and not c.ok], rep.summary()
    else:  # fp16 rounding already fails the plan (no probes run after a failed plan)
        assert fn is gemm_through_fp16 and not rep.probes, rep.summary()


def vecadd_int16_index(x, y):
    out = x + y
    n = x.numel()
    if n > 2**15:  # an int16 index wraps: the upper part is written over the lower
        idx = torch.arange(n, dtype=torch.int64).to(torch.int16).to(torch.int64) % n
        out = torch.zeros_like(out)
        out[idx] = (x + y)[idx]
    return out


def test_an_index_that_overflows_16_bits_fails_the_wide_probe():
    rep = wb.check(vecadd_int16_index, "vecadd", seeds=(0,))
    assert all(c.ok for c in rep.cases)
    (wide,) = [c for c in rep.failures if c.probe == "index width"]
    assert wide.shape["N"] > 2**16 and not rep.ok
