"""scripts/gpu-run.sh --smoke: the GPU script's cpu-mode dry run, so it cannot rot; and the tarball's import."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

import workbench as wb
from tests.conftest import ROOT, load_script, subprocess_env

importer = load_script("scripts/import-gpu-results.py")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a bash script")


def _env(out: Path, **extra: str) -> dict:
    return subprocess_env(OUT=str(out), PYTHON=sys.executable, WORKBENCH_CPU_THREADS="1", **extra)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-run")
    r = subprocess.run(["bash", "scripts/gpu-run.sh", "--smoke"], cwd=ROOT, env=_env(out), capture_output=True,
                       text=True, timeout=400)
    return r, out


def _unpacked(out: Path, into: Path) -> Path:
    (tb,) = out.glob("gpu-run-*.tar.gz")
    with tarfile.open(tb) as tf:
        tf.extractall(into, filter="data")
    (run,) = into.glob("gpu-run-*")
    return run


def test_dry_run_leaves_one_tarball_and_the_summary(dry_run, tmp_path):
    r, out = dry_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert sorted(p.name.split("-")[0] for p in out.iterdir()) == ["gpu", "summary.txt"]  # 2 of the 8 files
    summary = (out / "summary.txt").read_text()
    for step in ("smoke", "smoke_gemm", "tests", "kernel_goals", "moe"):
        assert f"=== {step}: rc=0 in " in summary, summary
    assert "--smoke dry run: emulated" in summary and "=== end: exit 0" in summary
    versions = next(line for line in summary.splitlines() if line.startswith("versions: "))
    for name in ("torch", "triton", "cupy", "driver"):
        assert f"{name} " in versions
    assert "triton guard: ok" in summary and "import-gpu-results.py gpu-run-" in summary

    run = _unpacked(out, tmp_path)
    smoke = json.loads((run / "smoke.json").read_text())
    assert smoke["facts"]["mode"] == "cpu" and smoke["numba_cuda"]["ok"] and smoke["bf16_round_trip"]["ok"]
    assert "bit-exact" in smoke["bf16_round_trip"]["detail"]
    gemm = json.loads((run / "smoke-gemm.json").read_text())["gemm"]
    assert gemm["ok"] and "cuda_wgmma_tma is GPU-only" in gemm["detail"]
    for tag, ops in (("gemm", {"gemm"}), ("softmax", {"softmax"}), ("attention", {"attention", "attention_bwd"}),
                     ("decode", {"decode_attention"}), ("norms", {"layernorm", "add_rmsnorm", "layernorm_bwd", "gemm",
                                                                  "gemm_w8a8"}),
                     ("moe", {"moe", "gemm", "moe_fp8"})):
        (f,) = (run / "results").glob(f"*-{tag}.json")
        recs = json.loads(f.read_text())["records"]
        assert recs and all(x["emulated"] for x in recs) and {x["op"] for x in recs} == ops
        (g,) = (run / "results" / "goals").glob(f"{tag}-*.json")
        assert json.loads(g.read_text())["goals"] == {}  # emulated times never make a goal ratio
    assert (run / "tests.xml").is_file() and 'failures="0"' in (run / "tests.xml").read_text()
    assert {p.name for p in (run / "logs").iterdir()} >= {"smoke.log", "smoke_gemm.log", "tests.log", "moe.log"}


def test_dry_run_goal_scripts_write_labelled_cpu_records(dry_run, tmp_path):
    """kernel_goals.py and moe_goals.py --smoke, as the dry run ran them: CPU times labelled so, never a goal ratio."""
    r, out = dry_run
    assert r.returncode == 0, r.stdout[-3000:]
    res = _unpacked(out, tmp_path) / "results"
    for log in ("kernel_goals.log", "moe.log"):
        assert "[cpu smoke run: CPU times, not GPU figures" in (res.parent / "logs" / log).read_text()
    for op in ("gemm", "softmax", "attention", "decode", "norms"):
        (f,) = res.glob(f"*-{op}.json")
        assert all(x["tflops"] is None for x in json.loads(f.read_text())["records"])
        (g,) = (res / "goals").glob(f"{op}-*.json")
        g = json.loads(g.read_text())
        assert g["mode"] == "cpu" and g["command"].startswith("python benchmarks/kernel_goals.py"), g
    (g,) = (res / "goals").glob("decode-*.json")
    g = json.loads(g.read_text())  # timed on make's case "full", beside SDPA on a dense cache (FlashInfer if any)
    assert g["inputs"].startswith("make case 'full'") and g["kv_bytes"] == g["copy_bytes"] > 0
    assert g["copy_bandwidth_gbs"] > 0 and g["kv_gbs"] == {} and g["goals"] == {}
    assert g["baselines"]["torch SDPA, dense cache"]["time_ms"] > 0
    assert "flashinfer paged decode" in g["baselines"] or any("flashinfer" in n for n in g["notes"])
    (g,) = (res / "goals").glob("norms-*.json")
    g = json.loads(g.read_text())  # the torch baselines timed, labelled CPU; no ratio from them
    assert set(g["gbs"]) == {"layernorm", "add_rmsnorm", "layernorm_bwd"} and g["goals"] == {}
    assert g["times_ms"]["gemm bf16 torch_matmul"] > 0 and g["copy_bandwidth_gbs"] > 0
    att = json.loads(next(res.glob("*-attention.json")).read_text())
    assert att["records"][0]["shape"]["causal"] == 0  # flags are stored as 0/1 in a record's shape

    (g,) = (res / "goals").glob("moe-*.json")
    g = json.loads(g.read_text())
    assert g["mode"] == "cpu" and g["copy_bandwidth_gbs"] > 0 and g["goals"] == {}  # no emulated goal ratios
    assert g["prefill"]["dense_matmul_shape"] == {"M": 128, "N": 3 * 224, "K": 64}  # [T*k, d] @ [d, 3I]
    if "torch_grouped_mm" in {v.name for v in wb.variants("moe")}:
        assert g["decode"][0]["experts_hit"] > 0 and "torch_grouped_mm" in g["decode"][0]["times_ms"]
    fp8 = g["fp8_stretch"]  # timed for the record, never a goal: the smoke run times the torch recipe
    assert fp8["variant"] == "moe_fp8/torch_dequant" and fp8["prefill"]["time_ms"] > 0
    assert fp8["decode"][0]["T"] == 4 and fp8["decode"][0]["weight_bytes"] == g["decode"][0]["weight_bytes"] // 4


def test_import_refuses_a_dry_run(dry_run, tmp_path, capsys):
    _, out = dry_run
    (tb,) = out.glob("gpu-run-*.tar.gz")
    assert importer.main([str(tb), "--dest", str(tmp_path / "results")]) == 2
    assert "emulated record(s)" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_import_writes_gpu_records_with_provenance(tmp_path, capsys):
    from tests._bench_fakes import make_record
    from workbench.results import load_results_file, save_results

    run = tmp_path / "box" / "gpu-run-20261202T101500Z"
    recs = [make_record("triton_autotuned", n) for n in (4096, 8192)]
    save_results(recs, run / "results" / "nvidia-h200-2026-12-02-gemm.json", "python benchmarks/kernel_goals.py")
    (run / "results" / "goals").mkdir()
    (run / "results" / "goals" / "gemm-nvidia-h200-2026-12-02.json").write_text(json.dumps(
        {"op": "gemm", "mode": "gpu", "goals": {"x": {"ratio": 0.97, "goal": 0.95, "met": True}}}))
    (run / "summary.txt").write_text("=== gpu-run 20261202T101500Z: mode gpu\ngit: abc1234\n")
    tb = tmp_path / "gpu-run-20261202T101500Z.tar.gz"
    with tarfile.open(tb, "w:gz") as tf:
        tf.add(run, arcname=run.name)
    dest = tmp_path / "results"
    assert importer.main([str(tb), "--dest", str(dest), "--host-note", "first H200 run"]) == 0
    doc = load_results_file(dest / "nvidia-h200-2026-12-02-gemm.json")
    assert len(doc["records"]) == 2 and doc["provenance"]["command"] == "python benchmarks/kernel_goals.py"
    note = doc["provenance"]["host_note"]
    assert "gpu-run.sh run 20261202T101500Z" in note and "git abc1234" in note and "first H200 run" in note
    assert (dest / "goals" / "gemm-nvidia-h200-2026-12-02.json").is_file()
    assert (dest / "gpu-runs" / "20261202T101500Z.txt").read_text().startswith("=== gpu-run")
    capsys.readouterr()
    assert importer.main([str(tb), "--dest", str(dest)]) == 2  # never overwrites without --force
    assert "exists; pass --force" in capsys.readouterr().err


def test_a_signal_still_returns_the_tarball(tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen(["bash", "scripts/gpu-run.sh", "--smoke"], cwd=ROOT, env=_env(out, STEPS="smoke"),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    for line in p.stdout:  # wait until the first step is running, then stop the whole script as a timeout would
        if line.startswith("=== smoke (timeout"):
            break
        assert time.time() - t0 < 120
    time.sleep(1)
    os.kill(p.pid, signal.SIGTERM)
    p.stdout.read()
    assert p.wait(timeout=60) == 143
    summary = (out / "summary.txt").read_text()
    assert "=== stopped by a signal" in summary and "=== end: exit 143" in summary
    (tb,) = out.glob("gpu-run-*.tar.gz")
    with tarfile.open(tb) as tf:
        assert any(n.endswith("logs/smoke.log") for n in tf.getnames())
