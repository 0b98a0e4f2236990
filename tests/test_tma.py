"""workbench.cuda.tma: the cuTensorMapEncodeTiled arguments for 2-D tensors, and the rules TMA enforces."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import CPU_MODE
from workbench.cuda import tma


def test_row_major_args_are_innermost_first():
    a = tma.tiled_2d_args((300, 136), 136, torch.bfloat16, 0x1000, box_rows=128, box_cols=64)
    assert a.global_dim == (136, 300) and a.global_strides == (272,) and a.box_dim == (64, 128)
    assert a.data_type == 9 and a.swizzle == 3  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B
    assert tma.tiled_2d_args((8, 8), 8, torch.float16, 0, 8, 8, swizzle=0).data_type == 6


@pytest.mark.parametrize("kw,match", [
    ({"row_stride": 9}, "multiple of 16 bytes"),
    ({"data_ptr": 0x1008}, "16-byte aligned"),
    ({"box_cols": 128}, "inner extent"),
    ({"box_rows": 512}, "1..256"),
    ({"swizzle": 96}, "swizzle must be"),
    ({"dtype": torch.complex64}, "unsupported dtype"),
])
def test_rules_are_named(kw, match):
    args = {"shape": (64, 64), "row_stride": 64, "dtype": torch.float16, "data_ptr": 0x1000, "box_rows": 64,
            "box_cols": 64, **kw}
    with pytest.raises(ValueError, match=match):
        tma.tiled_2d_args(**args)


@pytest.mark.skipif(not CPU_MODE, reason="a GPU machine has the driver")
def test_encode_without_a_driver_says_so():
    args = tma.tiled_2d_args((64, 64), 64, torch.float16, 0x1000, 64, 64)
    with pytest.raises(RuntimeError, match="libcuda|cuInit"):
        tma.encode_tiled_2d(args, 0x1000)


@pytest.mark.skipif(CPU_MODE, reason="needs the NVIDIA driver")
def test_encode_on_a_gpu_gives_128_bytes_cached_on_device():
    t = torch.zeros((300, 136), dtype=torch.bfloat16, device="cuda")
    m1 = tma.tensor_maps_on_device([(t, 128, 64)])
    assert m1.numel() == 128 and m1.device.type == "cuda" and m1.cpu().any()
    assert tma.tensor_maps_on_device([(t, 128, 64)]) is m1
    with pytest.raises(ValueError, match="unit column stride"):
        tma.tensor_maps_on_device([(t.t(), 64, 64)])
