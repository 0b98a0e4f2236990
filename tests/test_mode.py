"""The mode decision, in fresh interpreters: forced modes, bad values, and numba/triton imported too early."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, subprocess_env

REPORT = textwrap.dedent("""
    import json, os, sys
    try:
        {pre}
        import workbench
        out = {{"ok": True, "mode": workbench.mode(), "reason": workbench.MODE_REASON,
               "sim": os.environ.get("NUMBA_ENABLE_CUDASIM"), "interp": os.environ.get("TRITON_INTERPRET")}}
        {post}
    except Exception as e:
        out = {{"ok": False, "type": type(e).__name__, "bases": [c.__name__ for c in type(e).__mro__],
               "msg": str(e)}}
    print("RESULT " + json.dumps(out))
""")

# name: (code run before `import workbench`, code run after, environment overrides)
CASES = {
    "cpu": ("pass", "import numba; out['numba_sim'] = int(numba.config.ENABLE_CUDASIM)",
            {"WORKBENCH_MODE": "cpu"}),
    "gpu_without_gpu": ("pass", "pass", {"WORKBENCH_MODE": "gpu", "CUDA_VISIBLE_DEVICES": ""}),
    "bogus": ("pass", "pass", {"WORKBENCH_MODE": "bogus"}),
    "auto_without_gpu": ("pass", "pass", {"CUDA_VISIBLE_DEVICES": ""}),
    "numba_first": ("import numba", "pass", {"WORKBENCH_MODE": "cpu"}),
    "numba_first_sim": ("import numba", "pass", {"WORKBENCH_MODE": "cpu", "NUMBA_ENABLE_CUDASIM": "1"}),
    "triton_first": ("import triton", "pass", {"WORKBENCH_MODE": "cpu"}),
    "triton_first_interp": ("import triton", "pass", {"WORKBENCH_MODE": "cpu", "TRITON_INTERPRET": "1"}),
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Run every case in its own interpreter, all at once, and parse what each printed."""
    procs = {}
    for name, (pre, post, env) in CASES.items():
        code = REPORT.format(pre=pre, post=post)
        procs[name] = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=subprocess_env(**env),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=120)
        line = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, f"{name}: no result (rc={p.returncode})\n{stdout}\n{stderr}"
        out[name] = json.loads(line[-1][len("RESULT "):])
    return out


def _ok(res: dict) -> dict:
    assert res["ok"], res
    return res


def _mode_error(res: dict) -> str:
    assert not res["ok"], f"expected a ModeError, got {res}"
    assert res["type"] == "ModeError", res
    assert "RuntimeError" in res["bases"]
    return res["msg"]


def test_forced_cpu_sets_emulation(results):
    r = _ok(results["cpu"])
    assert r["mode"] == "cpu" and "WORKBENCH_MODE" in r["reason"]
    assert r["sim"] == "1" and r["interp"] == "1"
    assert r["numba_sim"] == 1  # numba imported after workbench really is the simulator


def test_forced_gpu_without_gpu_is_a_clear_error(results):
    msg = _mode_error(results["gpu_without_gpu"])
    assert "WORKBENCH_MODE=gpu" in msg and "no usable CUDA device" in msg
    assert "Unset WORKBENCH_MODE" in msg


def test_bogus_mode_names_valid_values(results):
    msg = _mode_error(results["bogus"])
    assert "'bogus'" in msg and "'cpu'" in msg and "'gpu'" in msg


def test_auto_without_gpu_is_cpu(results):
    r = _ok(results["auto_without_gpu"])
    assert r["mode"] == "cpu" and r["sim"] == "1" and r["interp"] == "1"
    assert r["reason"]


def test_numba_imported_first_is_refused(results):
    msg = _mode_error(results["numba_first"])
    assert "numba" in msg and "NUMBA_ENABLE_CUDASIM" in msg
    assert "import workbench before numba" in msg and "restart the kernel" in msg


def test_numba_imported_first_in_simulator_mode_is_fine(results):
    assert _ok(results["numba_first_sim"])["mode"] == "cpu"


def test_triton_imported_first_without_interpreter_is_refused(results):
    msg = _mode_error(results["triton_first"])
    assert "triton" in msg and "TRITON_INTERPRET" in msg
    assert "import workbench before" in msg and "restart the kernel" in msg


def test_triton_imported_first_with_interpreter_is_fine(results):
    r = _ok(results["triton_first_interp"])
    assert r["mode"] == "cpu" and r["interp"] == "1"
