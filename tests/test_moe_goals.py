"""benchmarks/moe_goals.py: refuses to make GPU figures without a GPU; its --smoke run exercises the plumbing."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from tests.conftest import ROOT, load_script

moe_goals = load_script("benchmarks/moe_goals.py")

pytestmark = pytest.mark.skipif(wb.mode() == "gpu", reason="the cpu-mode behaviour of the goal script")


def test_refuses_without_a_gpu_and_never_writes_smoke_runs_into_results(capsys):
    assert moe_goals.main([]) == 2
    assert "GPU figures only come from a GPU" in capsys.readouterr().err
    assert moe_goals.main(["--smoke", "--out-dir", str(ROOT / "results")]) == 2


def test_smoke_run_writes_records_and_goal_ratios(tmp_path, capsys):
    assert moe_goals.main(["--smoke", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[cpu smoke run: CPU times, not GPU figures" in out
    (records,) = tmp_path.glob("*-moe.json")
    doc = json.loads(records.read_text())
    assert doc["records"] and all(r["emulated"] for r in doc["records"])
    assert {r["op"] for r in doc["records"]} == {"moe", "gemm", "moe_fp8"}
    (goals,) = (tmp_path / "goals").glob("moe-*.json")
    g = json.loads(goals.read_text())
    assert g["mode"] == "cpu" and g["copy_bandwidth_gbs"] > 0 and g["goals"] == {}  # no emulated goal ratios
    assert g["prefill"]["dense_matmul_shape"] == {"M": 128, "N": 3 * 224, "K": 64}  # [T*k, d] @ [d, 3I]
    if "torch_grouped_mm" in {v.name for v in wb.variants("moe")}:
        assert g["decode"][0]["experts_hit"] > 0 and "torch_grouped_mm" in g["decode"][0]["times_ms"]
    fp8 = g["fp8_stretch"]  # timed for the record, never a goal: the smoke run times the torch recipe
    assert fp8["variant"] == "moe_fp8/torch_dequant" and fp8["prefill"]["time_ms"] > 0
    assert fp8["decode"][0]["T"] == 4 and fp8["decode"][0]["weight_bytes"] == g["decode"][0]["weight_bytes"] // 4
