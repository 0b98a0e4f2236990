"""The mode decision, in fresh interpreters: forced modes, bad values, and numba/triton imported too early."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

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

# End to end, in fresh interpreters (each pays torch's ~7 s import): the forced cpu mode really makes numba the
# simulator, and numba imported first really is refused. The other cases exercise the same two functions in this
# process (tests below), with the environment and sys.modules patched.
# name: (code run before `import workbench`, code run after, environment overrides)
CASES = {
    "cpu": ("pass", "import numba; out['numba_sim'] = int(numba.config.ENABLE_CUDASIM)",
            {"WORKBENCH_MODE": "cpu"}),
    "numba_first": ("import numba", "pass", {"WORKBENCH_MODE": "cpu"}),
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


def _in_process(monkeypatch, env: dict[str, str], modules: dict[str, object] | None = None,
                cuda: bool = False) -> dict:
    """Return what REPORT would say for ``env`` (and already-imported ``modules``), deciding in this process."""
    import torch

    from workbench import _mode

    for k in ("WORKBENCH_MODE", "TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    for name in ("numba", "triton"):
        if name in (modules or {}):
            monkeypatch.setitem(sys.modules, name, modules[name])
        else:
            monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        mode, why = _mode._decide()
        _mode._check_not_contradicted(mode)
    except Exception as e:  # noqa: BLE001  (the report keeps what a fresh interpreter would have raised)
        return {"ok": False, "type": type(e).__name__, "bases": [c.__name__ for c in type(e).__mro__],
                "msg": str(e)}
    return {"ok": True, "mode": mode, "reason": why}


def _fake_numba(sim: int) -> object:
    return types.SimpleNamespace(config=types.SimpleNamespace(ENABLE_CUDASIM=sim))


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


def test_forced_gpu_without_gpu_is_a_clear_error(monkeypatch):
    msg = _mode_error(_in_process(monkeypatch, {"WORKBENCH_MODE": "gpu"}))
    assert "WORKBENCH_MODE=gpu" in msg and "no usable CUDA device" in msg
    assert "Unset WORKBENCH_MODE" in msg


def test_bogus_mode_names_valid_values(monkeypatch):
    msg = _mode_error(_in_process(monkeypatch, {"WORKBENCH_MODE": "bogus"}))
    assert "'bogus'" in msg and "'cpu'" in msg and "'gpu'" in msg


def test_auto_without_gpu_is_cpu(monkeypatch):
    r = _ok(_in_process(monkeypatch, {}))
    assert r["mode"] == "cpu" and r["reason"]
    assert _ok(_in_process(monkeypatch, {"WORKBENCH_MODE": "cpu"}, cuda=True))["mode"] == "cpu"  # forced wins


def test_numba_imported_first_is_refused(results):
    msg = _mode_error(results["numba_first"])
    assert "numba" in msg and "NUMBA_ENABLE_CUDASIM" in msg
    assert "import workbench before numba" in msg and "restart the kernel" in msg


def test_numba_imported_first_in_simulator_mode_is_fine(monkeypatch):
    assert _ok(_in_process(monkeypatch, {"WORKBENCH_MODE": "cpu"}, {"numba": _fake_numba(1)}))["mode"] == "cpu"
    msg = _mode_error(_in_process(monkeypatch, {"WORKBENCH_MODE": "cpu"}, {"numba": _fake_numba(0)}))
    assert "NUMBA_ENABLE_CUDASIM=0" in msg  # the same refusal as the fresh interpreter's, decided here


def test_triton_imported_first_without_interpreter_is_refused(monkeypatch):
    msg = _mode_error(_in_process(monkeypatch, {"WORKBENCH_MODE": "cpu"}, {"triton": types.ModuleType("triton")}))
    assert "triton" in msg and "TRITON_INTERPRET" in msg
    assert "import workbench before" in msg and "restart the kernel" in msg


def test_triton_imported_first_with_interpreter_is_fine(monkeypatch):
    r = _ok(_in_process(monkeypatch, {"WORKBENCH_MODE": "cpu", "TRITON_INTERPRET": "1"},
                        {"triton": types.ModuleType("triton")}))
    assert r["mode"] == "cpu"
