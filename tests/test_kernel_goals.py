"""benchmarks/kernel_goals.py: refuses to make GPU figures without a GPU (its --smoke run: tests/test_gpu_run.py)."""

from __future__ import annotations

import json

import pytest
import torch

import workbench as wb
from tests.conftest import ROOT, load_script

kernel_goals = load_script("benchmarks/kernel_goals.py")

pytestmark = pytest.mark.skipif(wb.mode() == "gpu", reason="the cpu-mode behaviour of the goal script")


def test_refuses_without_a_gpu_bad_ops_and_results_dir(capsys):
    assert kernel_goals.main([]) == 2
    assert "GPU figures only come from a GPU" in capsys.readouterr().err
    assert kernel_goals.main(["--smoke", "--out-dir", str(ROOT / "results")]) == 2
    assert kernel_goals.main(["--smoke", "--op", "gemm,nope"]) == 2
    assert "unknown op" in capsys.readouterr().err


def test_ratio_is_baseline_time_over_ours_and_goals_are_the_issues():
    goals = {"goals": {}}
    base = {"time_ms": 2.0, "emulated": False}
    kernel_goals._ratio(goals, "x", base, ("mine", {"time_ms": 2.5, "emulated": False}), 0.9)
    assert goals["goals"]["x"] == {"ratio": 0.8, "goal": 0.9, "variant": "mine"}
    kernel_goals._ratio(goals, "y", base, ("mine", {"time_ms": 1.0, "emulated": True}), 0.9)
    assert "y" not in goals["goals"]  # an emulated time never makes a goal ratio
    doc = kernel_goals.__doc__
    for text in (">= 0.95 at 8192^3", ">= 0.90 of cuBLAS SGEMM with TF32 off", ">= 0.60", ">= 0.90 and Triton",
                 ">= 1.1x", ">= 0.75", ">= 0.80", ">= 0.70"):
        assert text in doc


def test_quiet_write_saves_partial_results_without_the_summary(tmp_path, capsys):
    from workbench.benchmark_goals import write

    rec = wb.bench(wb.variant("vecadd", "torch_add"), N=1024)
    goals = {"goals": {"x": {"ratio": 2.0, "goal": 1.0}}}
    out, gfile = write(goals, [rec], tmp_path, "partial", "cmd", ["a note"], quiet=True)
    assert capsys.readouterr().out == ""  # a section's save says nothing; the final write prints the summary
    assert json.loads(gfile.read_text())["goals"]["x"]["met"] and json.loads(out.read_text())["records"]
    goals["goals"]["y"] = {"ratio": 0.5, "goal": 1.0}
    out2, gfile2 = write(goals, [rec, rec], tmp_path, "partial", "cmd", ["a note"])
    assert (out2, gfile2) == (out, gfile) and len(json.loads(out.read_text())["records"]) == 2  # replaced
    assert "NOT met" in capsys.readouterr().out


STOPPER = """
import pathlib, runpy, sys, time
import workbench as wb
ready, out_dir = pathlib.Path(sys.argv[1]), sys.argv[2]
real, calls = wb.bench, []
def slow_bench(*args, **kwargs):  # the second measurement hangs, as a slow kernel would
    calls.append(1)
    if len(calls) == 2:
        ready.write_text("measuring")
        time.sleep(120)
    return real(*args, **kwargs)
wb.bench = slow_bench
sys.argv = ["benchmarks/kernel_goals.py", "--smoke", "--op", "attention", "--out-dir", out_dir]
runpy.run_path("benchmarks/kernel_goals.py", run_name="__main__")
"""


def test_sigterm_mid_op_keeps_what_finished(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import subprocess_env
    from workbench.results import load_results_file

    ready = tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-c", STOPPER, str(ready), str(tmp_path / "out")], cwd=ROOT,
                         env=subprocess_env(WORKBENCH_MODE="cpu"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.time()
    while not ready.exists() and p.poll() is None and time.time() - t0 < 240:
        time.sleep(0.2)
    assert ready.exists(), p.communicate()
    p.send_signal(signal.SIGTERM)  # what `timeout` sends when a step runs out of time
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, (out, err)
    assert "what finished is saved" in err
    (records,) = (tmp_path / "out").glob("*-attention.json")
    doc = load_results_file(records)  # complete and valid: written before the signal, atomically
    assert [(r["op"], r["variant"]) for r in doc["records"]] == [("attention", "torch_sdpa")]
    (goals,) = (tmp_path / "out" / "goals").glob("attention-*.json")
    g = json.loads(goals.read_text())
    assert g["tflops"]["smoke"] == {"torch_sdpa": None} and "bwd_d128_S8k" not in g["tflops"]
    assert any("stopped by SIGTERM" in n for n in g["notes"]), g["notes"]
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_checks_reuse_the_goal_shapes_autotune_result():
    # A real triton.autotune object (run by the interpreter here): inside reuse_tuning, a new key takes the pinned
    # config without timing any, unless the kernel's own prune drops it there; keys met inside are then forgotten.
    import triton
    import triton.language as tl

    from workbench.benchmark_goals import launched, reuse_tuning

    @triton.jit
    def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    configs = [triton.Config({"BLOCK": b}, num_warps=1) for b in (16, 32, 64)]
    tuner = triton.autotune(configs, key=["n"], prune_configs_by={
        "early_config_prune": lambda cs, named, **kw: [c for c in cs if c.kwargs["BLOCK"] <= named["n"]] or cs[:1]})(
        double)

    def call(n: int):
        x = torch.arange(n, dtype=torch.float32)
        out = torch.empty_like(x)
        tuner[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        assert torch.equal(out, 2 * x)

    tuner.cache[("goal",)] = configs[1]  # what tuning at the goal shape left
    with launched([tuner]) as used, reuse_tuning({tuner: configs[1]}):
        call(50)  # BLOCK 32 is kept by the prune: the pinned config
        assert tuner.best_config == configs[1]
        call(20)  # the prune keeps only BLOCK 16 here
        assert tuner.best_config == configs[0]
    assert used == [tuner] and set(tuner.cache) == {("goal",)}
    assert "_bench" not in vars(tuner) and "run" not in vars(tuner)
