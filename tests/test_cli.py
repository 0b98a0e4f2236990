"""The command line, run as `python -m workbench ...` in cpu mode: doctor, bench, and a bad op."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import pytest

import workbench as wb
from tests.conftest import ROOT, cuda_engine_ready, subprocess_env

BACKENDS = ("torch", "triton", "numba", "cupy", "cuda", "cute")


def _main(args: list[str]) -> subprocess.CompletedProcess:
    """Run ``python -m workbench ARGS`` in this process (what the command runs, without a second torch import)."""
    from workbench.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except SystemExit as e:  # argparse's usage errors
            rc = e.code
    return subprocess.CompletedProcess(["python", "-m", "workbench", *args], rc, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """Run doctor as the real command (a fresh interpreter) while bench --op vecadd and bench --op nosuch run here."""
    out_dir = tmp_path_factory.mktemp("bench")
    out_json = out_dir / "x.json"
    doctor = subprocess.Popen([sys.executable, "-m", "workbench", "doctor"], cwd=ROOT,
                              env=subprocess_env(WORKBENCH_MODE="cpu"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    res = {"bench": _main(["bench", "--op", "vecadd", "--out", str(out_json)]),
           "nosuch": _main(["bench", "--op", "nosuch"])}
    stdout, stderr = doctor.communicate(timeout=300)
    res["doctor"] = subprocess.CompletedProcess(doctor.args, doctor.returncode, stdout, stderr)
    res["out_json"] = out_json
    return res


def test_doctor(cli):
    r = cli["doctor"]
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^mode: cpu\b.*WORKBENCH_MODE", out, re.M), out
    assert "kernels run emulated" in out
    for key in ("python", "torch", "triton", "numba", "numba_cuda", "cupy", "nvcc"):
        assert re.search(rf"^  {key}\s+\S", out, re.M), f"no version line for {key}:\n{out}"
    assert re.search(r"^  python\s+" + re.escape(".".join(map(str, sys.version_info[:2]))), out, re.M)
    lines = {}
    for b in BACKENDS:
        m = re.search(rf"^  {b}\s+(native|emulated|compile-only|unavailable)\s+(.+)$", out, re.M)
        assert m, f"no backend line for {b}:\n{out}"
        lines[b] = m.group(1)
    assert lines["torch"] == "native"
    assert lines["triton"] == "emulated" and lines["numba"] == "emulated"
    assert lines["cuda"] in ("emulated", "unavailable")
    # CuTe DSL: the pinned version, and no emulator: its kernels compile here (for wb.inspect) but do not run
    assert lines["cute"] == "compile-only"
    assert re.search(r"^  cute\s+compile-only\s+CuTe DSL 4\.8\.1: no CPU emulator.*sm_90a", out, re.M), out


def test_bench_writes_json_and_html(cli):
    r = cli["bench"]
    out_json = cli["out_json"]
    assert out_json.is_file(), f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "kernel-workbench/bench/1"
    assert doc["provenance"]["command"].startswith("python -m workbench bench --op vecadd")
    recs = doc["records"]
    assert recs
    names = {rec["variant"] for rec in recs}
    assert "torch_add" in names, names
    assert not any(n.startswith("wrong_") for n in names), "known-wrong kernels must not be benchmarked"
    # emulated variants are either timed (labelled emulated) or, by default, checked and reported as not timed
    for name in ("triton_block", "numba_grid"):
        assert name in names or re.search(rf"^checked vecadd/{name} float32: pass", r.stdout, re.M), r.stdout
    for rec in recs:
        assert rec["op"] == "vecadd" and rec["emulated"] is True
        assert rec["tflops"] is None and rec["gbps"] is None and rec["pct_peak"] is None
        assert rec["shape"] == {"N": 4096}
        assert rec["p20_ms"] <= rec["time_ms"] <= rec["p80_ms"]
    html_path = out_json.with_suffix(".html")
    assert html_path.is_file()
    html = html_path.read_text()
    assert "<table" in html and "Emulated run" in html and "triton_block" in html
    assert f"wrote {out_json}" in r.stdout


def test_bench_records_pass_the_results_schema(cli):
    from workbench import results

    doc = results.load_results_file(cli["out_json"])
    for rec in doc["records"]:
        results.validate_record(rec)


def test_bench_exit_status_reflects_failures(cli):
    r = cli["bench"]
    failed = set(re.findall(r"^FAIL vecadd/(\w+): not timed", r.stdout, re.M))
    allowed = set()
    if why := cuda_engine_ready():  # no C++ compiler for the CPU engine
        allowed = {v.name for v in wb.variants("vecadd", backend="cuda")}
        print(f"tolerating failures of {allowed}: {why}")
    assert failed <= allowed, r.stdout
    assert r.returncode == (1 if failed else 0), (r.returncode, r.stdout, r.stderr)


def test_bench_unknown_op_names_known_ops(cli):
    r = cli["nosuch"]
    assert r.returncode != 0
    err = r.stderr + r.stdout
    assert "unknown op 'nosuch'" in err
    assert all(op in err for op in ("attention", "gemm", "moe", "softmax", "vecadd")), err


def test_cli_without_subcommand_is_a_usage_error(capsys):
    from workbench.__main__ import main

    with pytest.raises(SystemExit) as ei:
        main([])
    assert ei.value.code == 2
    assert "doctor" in capsys.readouterr().err


def test_backend_status_in_process():
    from workbench.__main__ import backend_status

    st = backend_status()
    assert tuple(st) == BACKENDS
    for how, why in st.values():
        assert how in ("native", "emulated", "compile-only", "unavailable") and why


@pytest.mark.parametrize("op", ["", "  "])
def test_bench_empty_op_is_an_error_naming_the_ops(op, capsys):
    from workbench.__main__ import main

    with pytest.raises(SystemExit) as ei:
        main(["bench", "--op", op])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "--op needs an op's name" in err and all(o in err for o in ("gemm", "softmax", "vecadd"))


def test_bench_out_is_checked_before_any_work(tmp_path, capsys, monkeypatch):
    from workbench import __main__ as cli_mod

    monkeypatch.setattr(cli_mod, "run_bench", lambda *a, **k: pytest.fail("the run started"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "adir.json").mkdir()
    for out, why in ((afile / "sub" / "x.json", "is a file, so the folder"), (tmp_path / "adir.json", "is a folder"),
                     (tmp_path / "x.html", "name the JSON file")):
        with pytest.raises(SystemExit):
            cli_mod.main(["bench", "--op", "vecadd", "--out", str(out)])
        err = capsys.readouterr().err
        assert f"--out {out}" in err and why in err and "before any work" in err
    assert cli_mod.out_problem(tmp_path / "new" / "ok.json") is None


def test_env_vars_are_validated_with_their_name(monkeypatch):
    from workbench.cuda import _cpu

    monkeypatch.setenv("WORKBENCH_CPU_THREADS", "abc")
    with pytest.raises(ValueError, match="WORKBENCH_CPU_THREADS.*'abc'"):
        _cpu.n_threads()
    monkeypatch.setenv("WORKBENCH_CPU_THREADS", "3")
    assert _cpu.n_threads() == 3
