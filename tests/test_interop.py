"""workbench.interop: CUDA C kernels get bfloat16 as its raw 16-bit pattern in both modes (no ml_dtypes needed)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from workbench import interop


def test_to_raw_in_cpu_mode_views_bf16_as_int16_without_copying(monkeypatch):
    monkeypatch.setattr(interop, "MODE", "cpu")
    t = torch.randn(3, 5).to(torch.bfloat16)
    a = interop.to_raw(t)
    assert a.dtype == np.int16 and a.shape == (3, 5)
    assert a.ctypes.data == t.data_ptr()  # a view: the kernel writes land in the tensor
    assert torch.equal(torch.from_numpy(a.copy()).view(torch.bfloat16), t)
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        interop.to_numpy(t)


def test_to_raw_in_gpu_mode_hands_cupy_an_int16_view_for_bf16(monkeypatch):
    got = []

    def from_dlpack(x):  # what cupy.from_dlpack receives is what the kernel's pointer argument points at
        got.append(x)
        return x

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(from_dlpack=from_dlpack))
    monkeypatch.setattr(interop, "MODE", "gpu")
    t = torch.randn(4, 8).to(torch.bfloat16)
    interop.to_raw(t)
    assert got[-1].dtype == torch.int16 and got[-1].data_ptr() == t.data_ptr() and got[-1].shape == t.shape
    for dt in (torch.float32, torch.float16, torch.int32):  # other dtypes pass through as they are
        x = torch.zeros(2, 3, dtype=dt)
        interop.to_raw(x)
        assert got[-1].dtype == dt
    interop.to_cupy(t)  # to_cupy itself keeps bfloat16 (for code that wants cupy's own bf16 arrays)
    assert got[-1].dtype == torch.bfloat16
