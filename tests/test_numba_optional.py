"""A numba that fails to import disables the numba variants only, each with a clear UnsupportedHere reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

PROBE = textwrap.dedent("""
    import json
    import workbench as wb
    from workbench.registry import UnsupportedHere
    out = {}
    for op in ("vecadd", "gemm", "softmax", "attention", "moe"):
        vs = wb.variants(op, include_wrong=True)
        out[op] = sorted((v.name, v.backend) for v in vs)
    v = wb.variant("vecadd", "numba_grid")
    out["why"] = v.why_not_here("float32", {"N": 100})
    try:
        v(*wb.make_inputs("vecadd", N=100))
    except UnsupportedHere as e:
        out["raised"] = str(e)
    out["check_skipped"] = wb.check(v).skipped[:1]
    out["triton_ok"] = bool(wb.check(wb.variant("vecadd", "triton_block"), quick=True))
    from workbench.__main__ import backend_status
    out["doctor_numba"] = backend_status()["numba"]
    print("RESULT " + json.dumps(out))
""")


def _probe_broken(tmp_path) -> dict:
    """Return what PROBE prints in a fresh interpreter whose numba package raises on import."""
    fake = tmp_path / "fake" / "numba"  # found before the real one
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('numpy.core.multiarray failed to import (simulated)')\n")
    env = {**os.environ, "WORKBENCH_MODE": "cpu", "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _here() -> dict:
    """Return what the probe reports in this process, where numba imports fine (a second interpreter costs 7 s)."""
    import workbench as wb
    from workbench.__main__ import backend_status

    out = {op: sorted((v.name, v.backend) for v in wb.variants(op, include_wrong=True))
           for op in ("vecadd", "gemm", "softmax", "attention", "moe")}
    out["why"] = wb.variant("vecadd", "numba_grid").why_not_here("float32", {"N": 100})
    out["doctor_numba"] = backend_status()["numba"]
    return out


def test_broken_numba_disables_only_the_numba_variants(tmp_path):
    broken, fine = _probe_broken(tmp_path), _here()
    for op in ("vecadd", "gemm", "softmax", "attention", "moe"):
        assert [tuple(x) for x in broken[op]] == fine[op], op  # every variant still registered, numba ones included
        assert any(b == "numba" for _, b in broken[op]) and any(b != "numba" for _, b in broken[op])
    assert "numba failed to import (ImportError: numpy.core.multiarray failed" in broken["why"]
    assert "numba variants are disabled" in broken["raised"]
    assert broken["check_skipped"] and "numba failed to import" in broken["check_skipped"][0]
    assert broken["triton_ok"]  # the other backends of the same op still check out
    assert broken["doctor_numba"][0] == "unavailable" and "numba failed to import" in broken["doctor_numba"][1]
    assert fine["why"] is None and fine["doctor_numba"][0] == "emulated"
