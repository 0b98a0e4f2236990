"""benchmarks/moe_goals.py: refuses to make GPU figures without a GPU (its --smoke run: tests/test_gpu_run.py)."""

from __future__ import annotations

import pytest

import workbench as wb
from tests.conftest import ROOT, load_script

moe_goals = load_script("benchmarks/moe_goals.py")

pytestmark = pytest.mark.skipif(wb.mode() == "gpu", reason="the cpu-mode behaviour of the goal script")


def test_refuses_without_a_gpu_and_never_writes_smoke_runs_into_results(capsys):
    assert moe_goals.main([]) == 2
    assert "GPU figures only come from a GPU" in capsys.readouterr().err
    assert moe_goals.main(["--smoke", "--out-dir", str(ROOT / "results")]) == 2
