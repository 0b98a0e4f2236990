"""Check the device table: every field present, dense peaks, sources, lookups, ridge points."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from workbench import hardware as hw

PEAKS = ("fp64_tflops", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "fp8_tflops")


@pytest.mark.parametrize("key", ["H100-SXM", "H200", "A100-SXM-80GB", "L4", "RTX4090", "T4"])
def test_required_devices_present_with_every_field(key: str) -> None:
    spec = hw.DEVICES[key]
    assert spec.key == key
    for f in dataclasses.fields(spec):
        if f.name.startswith("measured") or f.name in ("notes", "fp64_tensor_tflops") or f.name in PEAKS[2:]:
            continue
        assert getattr(spec, f.name) not in (None, "", ()), f"{key}.{f.name} is empty"
    assert spec.cc.count(".") == 1 and spec.sm_count > 0 and spec.mem_gb > 0 and spec.l2_mb > 0
    assert spec.bandwidth_gbs > 100
    for f in PEAKS:
        src = spec.source(f)
        assert src.document and src.url, f"{key}.{f} has no source"


def test_dense_peaks_match_datasheets_halved() -> None:
    d = hw.DEVICES
    assert d["H100-SXM"].bf16_tflops == pytest.approx(1979 / 2) and d["H100-SXM"].fp8_tflops == 1979
    assert d["H200"].fp16_tflops == d["H100-SXM"].fp16_tflops and d["H200"].bandwidth_gbs == 4800
    assert d["A100-SXM-80GB"].tf32_tflops == 156 and d["A100-SXM-80GB"].bandwidth_gbs == 2039
    assert d["RTX4090"].fp16_tflops == pytest.approx(165.2)  # fp32 accumulate, not 330
    assert d["L4"].fp8_tflops == pytest.approx(485 / 2)
    for spec in d.values():
        if spec.tf32_tflops is not None:  # a dense tensor peak is never below the SIMT rate's order
            assert spec.fp16_tflops >= spec.tf32_tflops
        assert spec.fp32_tflops < (spec.fp16_tflops or 1e9)


def test_missing_units_are_none_and_raise_clearly() -> None:
    t4, a100 = hw.DEVICES["T4"], hw.DEVICES["A100-SXM-80GB"]
    assert t4.bf16_tflops is None and t4.fp8_tflops is None and t4.tf32_tflops is None
    assert a100.fp8_tflops is None
    with pytest.raises(ValueError, match="T4"):
        hw.peak_tflops("T4", "bfloat16")
    with pytest.raises(ValueError, match="A100"):
        hw.peak_tflops(a100, torch.float8_e4m3fn)


@pytest.mark.parametrize(
    ("torch_name", "key"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
        ("Tesla T4", "T4"),
        ("nvidia  h200", "H200"),
    ],
)
def test_lookup_realistic_torch_names(torch_name: str, key: str) -> None:
    assert hw.lookup(torch_name).key == key


def test_lookup_does_not_confuse_other_parts() -> None:
    for name in ("NVIDIA H100 PCIe", "NVIDIA H200 NVL", "NVIDIA A100 80GB PCIe", "NVIDIA B200"):
        assert hw.lookup(name) is None
    with pytest.raises(KeyError, match="Known devices: H100-SXM"):
        hw.get_device("NVIDIA B200")
    assert "NVIDIA B200" in hw.describe_unknown("NVIDIA B200")


def test_peak_tflops_dtypes() -> None:
    assert hw.peak_tflops("H200", torch.float32) == 67
    assert hw.peak_tflops("H200", "float32", tf32=True) == pytest.approx(494.5)
    assert hw.peak_tflops("H200", "float64") == 34
    assert hw.peak_tflops("H200", "float64", fp64_tensor=True) == 67
    assert hw.peak_tflops("H200", torch.bfloat16) == hw.peak_tflops("H200", "bf16") == pytest.approx(989.5)
    assert hw.peak_tflops("H200", "float8_e4m3fn") == 1979
    with pytest.raises(ValueError, match="unknown dtype"):
        hw.peak_tflops("H200", "int7")


def test_bandwidth_and_measured_ceilings() -> None:
    assert hw.peak_bandwidth("H200") == 4800
    assert hw.peak_bandwidth("H200", measured=True) == 4300
    assert hw.peak_bandwidth("T4", measured=True) is None
    assert hw.measured_tflops("H200", torch.bfloat16) == 790
    src = hw.DEVICES["H200"].source("measured_bandwidth_gbs")
    assert src.url == "results/ceilings.md" and "not in the repository" in src.document
    record = (Path(__file__).parent.parent / src.url).read_text()  # the cited record states the stored numbers
    assert "| 4300 GB/s |" in record and "| 790 TFLOP/s |" in record


def test_ridge_points() -> None:
    assert hw.ridge_point("H200", "bfloat16") == pytest.approx(989.5e12 / 4800e9)
    assert hw.ridge_point("H100-SXM", "bfloat16") == pytest.approx(295.4, rel=1e-3)
    assert hw.ridge_point("H200", "float32") == pytest.approx(67e12 / 4800e9)
    assert hw.ridge_point("H200", "bfloat16", measured=True) == pytest.approx(790e12 / 4300e9)


def test_current_device_is_none_in_cpu_mode() -> None:
    from workbench._mode import MODE

    if MODE == "cpu":
        assert hw.current_device() is None


@pytest.mark.parametrize("key", sorted(hw.DEVICES))
def test_every_device_links_to_its_arch_limits(key: str) -> None:
    from workbench.cuda import arch

    spec = hw.DEVICES[key]
    lim = spec.limits
    assert lim is arch.ARCHS[spec.sm]
    assert ".".join(map(str, lim.compute_capability)) == spec.cc
    assert lim.name == spec.sm and "sm_" in repr(spec.limits)


def test_h200_limits_are_the_sm90_table() -> None:
    lim = hw.get_device("H200").limits
    assert hw.get_device("H200").sm == "sm_90"
    assert (lim.max_smem_per_block, lim.max_smem_per_sm, lim.regs_per_sm) == (227 * 1024, 228 * 1024, 65536)
    assert hw.get_device("T4").limits.max_smem_per_block == 64 * 1024
