"""Given Triton kernels call the learner's @triton.jit helpers by name (kernels/_triton_hooks.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers

step = None  # the helper `twice_kernel` calls: bound by with_helpers


@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, step(x), mask=offs < n)


@triton.jit
def add_one(x):
    return x + 1.0


@triton.jit
def square(x):
    return x * x


def _run(helper) -> list[float]:
    x = torch.arange(5, dtype=torch.float32)
    out = torch.zeros_like(x)
    with_helpers(twice_kernel, "test", step=helper)[(1,)](x, out, 5, BLOCK=8)
    return out.tolist()


def test_the_bound_helper_runs_and_each_binding_keeps_its_own():
    assert _run(add_one) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert _run(square) == [0.0, 1.0, 4.0, 9.0, 16.0]
    assert _run(add_one) == [1.0, 2.0, 3.0, 4.0, 5.0]  # cached per helper, not per name
    assert with_helpers(twice_kernel, step=add_one) is with_helpers(twice_kernel, step=add_one)
    assert step is None  # the module's own name is left alone


def test_a_plain_function_is_told_to_add_the_decorator():
    def dkdv_step(x):
        return x

    with pytest.raises(TypeError, match=r"flash_backward: step must be a @triton.jit function .*@triton.jit"):
        with_helpers(twice_kernel, "flash_backward", step=dkdv_step)
    with pytest.raises(TypeError, match="calls no helper named 'other'"):
        with_helpers(twice_kernel, "test", other=add_one)
    with pytest.raises(TypeError, match="expected a @triton.jit kernel"):
        with_helpers(len, "test", step=add_one)


@pytest.mark.skipif(wb.mode() != "cpu", reason="the sm_90 front-end gate runs in cpu mode")
def test_the_gate_still_compiles_the_learners_helper():
    from workbench.cuda.errors import CompileError

    @triton.jit
    def host_call(x):
        return np.sqrt(x)  # a numpy call inside a kernel: a GPU refuses it

    with pytest.raises(CompileError, match="twice_kernel"):
        _run(host_call)


def test_the_attention_forward_without_causal_helpers_is_non_causal_only():
    from kernels.attention.ex_common import flash_forward

    q = torch.randn(1, 1, 4, 16)
    with pytest.raises(NotImplementedError, match="attention-causal-skip"):
        flash_forward(q, q, q, causal=True)
    out = flash_forward(q, q, q)  # the solved online update, no mask
    ref = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert torch.allclose(out, ref, atol=1e-5)
