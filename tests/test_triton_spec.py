"""kernels._launch.triton_spec: a Triton kernel's wb.inspect signature derived from its parameters and the launch."""

from __future__ import annotations

import pytest
import torch

from kernels._launch import triton_spec
from kernels.moe_fp8 import v1_triton_block
from kernels.softmax.v9_triton_fused import softmax_fused_kernel


def test_pointers_ints_and_constexprs_follow_the_kernel():
    spec = triton_spec(softmax_fused_kernel, torch.bfloat16, ROWS=2, BLOCK_N=1024, num_warps=8, num_stages=1)
    assert spec["signature"] == {"x_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "ROWS": "constexpr",
                                 "BLOCK_N": "constexpr"}
    assert spec["constexprs"] == {"ROWS": 2, "BLOCK_N": 1024} and (spec["num_warps"], spec["num_stages"]) == (8, 1)
    assert "divisible_by_16" not in spec  # wb.inspect's default: every pointer and integer


def test_exceptions_and_divisible_integers():
    spec = v1_triton_block.inspect_spec("quant")  # x bf16, q fp8 e4m3, s fp32; only C is a multiple of 16
    assert spec["signature"] == {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32", "R": "i32", "C": "i32",
                                 "G": "i32", "BLOCK_R": "constexpr", "GROUP": "constexpr"}
    assert spec["divisible_by_16"] == ["x_ptr", "q_ptr", "s_ptr", "C"]


@pytest.mark.parametrize("kw,match", [
    ({"ROWS": 2}, r"the tl.constexpr parameters \['BLOCK_N'\] need a value"),
    ({"ROWS": 2, "BLOCK_N": 8, "BLOCK": 8}, r"\['BLOCK'\] are not among its tl.constexpr parameters"),
    ({"ROWS": 2, "BLOCK_N": 8, "types": {"ROWS": int}}, r"types names \['ROWS'\], not among its arguments"),
    ({"ROWS": 2, "BLOCK_N": 8, "divisible_ints": ["x_ptr"]}, r"divisible_ints names \['x_ptr'\]"),
    ({"ROWS": 2, "BLOCK_N": 8, "types": {"M": "int7"}}, r"'int7' is no Triton element type"),
])
def test_a_spec_the_kernel_cannot_take_is_refused_naming_it(kw, match):
    with pytest.raises(TypeError, match=match):
        triton_spec(softmax_fused_kernel, **kw)
    with pytest.raises(TypeError, match=r"triton_spec\(softmax_fused_kernel\)|triton_spec: "):
        triton_spec(softmax_fused_kernel, **kw)
