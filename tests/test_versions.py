"""The Triton-version guard, the versions doctor prints, and a bench report on a box without plotly."""

from __future__ import annotations

import sys

import pytest

import workbench as wb
from workbench import versions


def test_torch_triton_pin_reads_the_wheels_requirement():
    reqs = ["filelock", 'triton==3.6.0; platform_system == "Linux" and platform_machine == "x86_64"',
            "sympy>=1.13.3"]
    assert versions.torch_triton_pin(reqs) == "3.6.0"
    assert versions.torch_triton_pin(["pytorch-triton==3.7.0+gitabc; extra == 'x'"]) == "3.7.0+gitabc"
    assert versions.torch_triton_pin(["filelock", "typing-extensions>=4.10"]) is None  # a CPU wheel


def test_triton_guard_flags_a_broken_pair_and_an_unverified_triton():
    ok, line = versions.triton_guard("3.6.0", "2.11.0", "3.6.0")
    assert ok and "torch 2.11.0 pins triton==3.6.0: in step" in line and "compile is verified" in line
    ok, line = versions.triton_guard("3.7.1", "2.11.0", "3.6.0")
    assert not ok and "pins triton==3.6.0 but triton 3.7.1 is installed" in line
    ok, line = versions.triton_guard("3.8.0", "2.14.0+cpu", None)
    assert ok and "pins no triton" in line and "NOT verified (verified: 3.6.0, 3.7.1)" in line
    ok, line = versions.triton_guard("", "2.11.0", None)
    assert not ok and "no triton installed" in line
    assert "3.7.1" in versions.VERIFIED_TRITON and "3.6.0" in versions.VERIFIED_TRITON


def test_doctor_names_torch_triton_cupy_driver_and_the_guard():
    from workbench.__main__ import doctor

    out = doctor()
    for key in ("torch", "triton", "cupy", "driver", "nvcc", "nvrtc"):
        assert f"\n  {key:<10} " in out, key
    assert "\ntriton guard: " in out
    assert versions.versions()["triton"] in out


def test_bench_html_report_without_plotly(monkeypatch):
    # A GPU box without the notebook wheels: `workbench bench --out` must still write its report after the timing.
    from workbench.__main__ import html_report

    rec = wb.bench(wb.variant("vecadd", "torch_add"), N=1024)
    gpu_rec = {**rec, "emulated": False, "tflops": 1e-3, "gbps": 1.0, "pct_peak": None}
    monkeypatch.setitem(sys.modules, "workbench.plots", None)  # import workbench.plots -> ImportError
    monkeypatch.delattr(wb, "plots", raising=False)  # (an earlier import left it on the package)
    page = html_report([gpu_rec], ["a note"])
    assert "No plots: plotly is not installed here" in page and "torch_add" in page and "a note" in page
    with pytest.raises(ImportError):
        from workbench import plots  # noqa: F401
