"""benchmarks/kernel_goals.py: refuses to make GPU figures without a GPU; its --smoke run exercises the plumbing."""

from __future__ import annotations

import json

import pytest

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


def test_smoke_run_writes_records_and_empty_goals_per_op(tmp_path, capsys):
    assert kernel_goals.main(["--smoke", "--out-dir", str(tmp_path)]) == 0
    assert "[cpu smoke run: CPU times, not GPU figures" in capsys.readouterr().out
    for op, ops in (("gemm", {"gemm"}), ("softmax", {"softmax"}), ("attention", {"attention", "attention_bwd"})):
        (records,) = tmp_path.glob(f"*-{op}.json")
        doc = json.loads(records.read_text())
        assert doc["records"] and all(r["emulated"] and r["tflops"] is None for r in doc["records"])
        assert {r["op"] for r in doc["records"]} == ops
        (goals,) = (tmp_path / "goals").glob(f"{op}-*.json")
        g = json.loads(goals.read_text())
        assert g["mode"] == "cpu" and g["goals"] == {}, g  # no ratio from emulated or CPU times
        assert g["command"].startswith("python benchmarks/kernel_goals.py")
    att = json.loads(next(tmp_path.glob("*-attention.json")).read_text())
    assert att["records"][0]["shape"]["causal"] == 0  # flags are stored as 0/1 in a record's shape


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
    from workbench.goals import write

    rec = wb.bench(wb.variant("vecadd", "torch_add"), N=1024)
    goals = {"goals": {"x": {"ratio": 2.0, "goal": 1.0}}}
    out, gfile = write(goals, [rec], tmp_path, "partial", "cmd", ["a note"], quiet=True)
    assert capsys.readouterr().out == ""  # a section's save says nothing; the final write prints the summary
    assert json.loads(gfile.read_text())["goals"]["x"]["met"] and json.loads(out.read_text())["records"]
    goals["goals"]["y"] = {"ratio": 0.5, "goal": 1.0}
    out2, gfile2 = write(goals, [rec, rec], tmp_path, "partial", "cmd", ["a note"])
    assert (out2, gfile2) == (out, gfile) and len(json.loads(out.read_text())["records"]) == 2  # replaced
    assert "NOT met" in capsys.readouterr().out
