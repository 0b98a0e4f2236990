"""The one dtype table: every consumer (registry, hardware, results, scripts) names dtypes the same way."""

from __future__ import annotations

import pytest
import torch
from _bench_fakes import make_record

import workbench as wb
from workbench import dtypes, hardware, results


@pytest.mark.parametrize("name", dtypes.NAMES)
def test_every_canonical_name_is_a_torch_dtype(name: str) -> None:
    assert str(dtypes.to_torch(name)) == f"torch.{name}"
    assert dtypes.canonical(getattr(torch, name)) == name
    assert wb.registry.as_dtype(name) is getattr(torch, name)


@pytest.mark.parametrize(("alias", "name"), sorted(dtypes.ALIASES.items()))
def test_aliases_agree_everywhere(alias: str, name: str) -> None:
    assert dtypes.canonical(alias.upper()) == name
    assert wb.registry.as_dtype(alias) is getattr(torch, name)
    assert wb.registry.dtype_name(alias) == name
    assert hardware.canonical_dtype(alias) == name  # every alias names a float


def test_hardware_takes_floats_and_tf32_only() -> None:
    assert hardware.canonical_dtype("TF32") == "tf32"
    assert hardware.canonical_dtype(torch.float8_e5m2) == "float8_e5m2"
    with pytest.raises(ValueError, match="unknown dtype 'int32'.*tf32"):
        hardware.canonical_dtype("int32")


def test_unknown_names_are_refused_with_the_list() -> None:
    with pytest.raises(ValueError, match=r"unknown dtype 'float13'.*'bfloat16'.*bf16"):
        dtypes.canonical("float13")
    with pytest.raises(ValueError, match=r"unknown dtype 'fp64' \(= float64\).*'float16'\]"):
        dtypes.canonical("fp64", among=("float32", "float16"))
    assert dtypes.to_torch(torch.uint8) is torch.uint8  # a torch dtype passes through


def test_results_schema_takes_canonical_names_only() -> None:
    for name in dtypes.NAMES:
        results.validate_record({**make_record(), "dtype": name})
    for alias in ("bf16", "torch.float16", "half"):
        with pytest.raises(results.RecordError, match="'dtype'"):
            results.validate_record({**make_record(), "dtype": alias})
