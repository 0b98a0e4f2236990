"""The Triton front-end gate (workbench/_triton_gate.py): what Triton's sm_90 compile refuses is refused in cpu mode.

Each kernel below runs under the interpreter alone (that is the bug: the interpreter is Python and accepts
anything Python accepts); each is refused with Triton's own message before it runs. The verdicts are cached on
disk; ``WORKBENCH_FRONTEND=0`` and ``frontend_gate(False)`` skip the gate.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import workbench  # noqa: F401  (cpu mode first)
from tests.conftest import requires_cpu_mode
from workbench import _triton_gate as gate
from workbench.cuda.errors import CompileError

pytestmark = requires_cpu_mode


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Give every test a cold verdict cache on disk (and no verdicts in memory from earlier tests)."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    for k in (dot_8x8, numpy_in_kernel, host_helper_in_kernel, arange_of_a_runtime_value, too_much_shared, copy,
              apply_passed):
        k.__dict__.pop("_wb_gate", None)


@triton.jit
def dot_8x8(a_ptr, c_ptr):
    r = tl.arange(0, 8)
    a = tl.load(a_ptr + r[:, None] * 8 + r[None, :])
    tl.store(c_ptr + r[:, None] * 8 + r[None, :], tl.dot(a, a))


@triton.jit
def numpy_in_kernel(x_ptr):
    tl.store(x_ptr, np.sin(tl.load(x_ptr)))


def host_scale(v):
    return v * 3


@triton.jit
def host_helper_in_kernel(x_ptr):
    tl.store(x_ptr, host_scale(tl.load(x_ptr)))


@triton.jit
def arange_of_a_runtime_value(x_ptr, n):
    offs = tl.arange(0, n)
    tl.store(x_ptr + offs, offs.to(tl.float32))


@triton.jit
def too_much_shared(a_ptr, c_ptr, BM: tl.constexpr, BK: tl.constexpr):
    rm, rk = tl.arange(0, BM), tl.arange(0, BK)
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, 4):
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :] + k)
        b = tl.load(a_ptr + rk[:, None] * BM + rm[None, :] + k)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BM + rm[None, :], acc)


@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _twice(v):
    return v * 2


@triton.jit
def _numpy_of(v):
    return np.sin(v)


@triton.jit
def apply_passed(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, FN(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def _refused(launch, *why: str) -> CompileError:
    with pytest.raises(CompileError) as e:
        launch()
    msg = str(e.value)
    assert "Triton's sm_90 compile" in msg and "WORKBENCH_FRONTEND=0" in msg, msg
    for w in why:
        assert w in msg, msg
    return e.value


def test_an_8x8_dot_is_refused_with_tritons_message():
    a, c = torch.randn(64), torch.zeros(64)
    err = _refused(lambda: dot_8x8[(1,)](a, c), "Triton kernel dot_8x8", "K >= 16", "tl.dot(a, a)")
    assert "K >= 16" in err.log  # the compiler's own text, for tools
    assert torch.equal(c, torch.zeros(64))  # it never ran


def test_python_calls_inside_a_kernel_are_refused():
    x = torch.ones(1)
    _refused(lambda: numpy_in_kernel[(1,)](x), "numpy_in_kernel", "sin")
    _refused(lambda: host_helper_in_kernel[(1,)](x), "host_helper_in_kernel", "host_scale")
    assert torch.equal(x, torch.ones(1))


def test_a_jit_function_passed_as_a_constexpr_compiles_and_its_own_calls_are_gated():
    """Triton lets a kernel take a @jit function as a constexpr argument (an activation): a GPU compiles it."""
    x, y = torch.arange(10.0), torch.zeros(10)
    apply_passed[(1,)](x, y, 10, FN=_twice, BLOCK=16)
    assert torch.equal(y, 2 * x)
    _refused(lambda: apply_passed[(1,)](x, y, 10, FN=_numpy_of, BLOCK=16), "apply_passed", "sin")


def test_arange_of_a_runtime_value_is_refused():
    _refused(lambda: arange_of_a_runtime_value[(1,)](torch.zeros(16), 16), "arange", "constexpr")


def test_more_shared_memory_than_an_h200_block_holds_is_refused():
    a, c = torch.randn(128 * 512 + 8, dtype=torch.float16), torch.zeros(128 * 128)
    _refused(lambda: too_much_shared[(1,)](a, c, BM=128, BK=512), "out of resource: shared memory",
             "Required: 262144, Hardware limit: 232448")  # 128x512 + 512x128 fp16 tiles: 256 KiB
    too_much_shared[(1,)](a, c, BM=64, BK=64)  # 16 KiB: fits, and runs


def test_the_gate_can_be_turned_off(monkeypatch):
    """The opt-out, for CPU-only interpreter features: the interpreter then runs what a GPU would refuse."""
    x = torch.full((1,), 2.0)
    with gate.frontend_gate(False):
        host_helper_in_kernel[(1,)](x)
    assert x.item() == 6.0
    monkeypatch.setenv("WORKBENCH_FRONTEND", "0")
    host_helper_in_kernel[(1,)](x)
    assert x.item() == 18.0
    monkeypatch.setenv("WORKBENCH_FRONTEND", "1")
    _refused(lambda: host_helper_in_kernel[(1,)](x))


def test_verdicts_are_cached_on_disk_per_specialisation(monkeypatch, tmp_path):
    compiles: list[int] = []
    real = gate._compile
    monkeypatch.setattr(gate, "_compile", lambda *a, **k: compiles.append(1) or real(*a, **k))
    x, y = torch.randn(48), torch.empty(48)
    copy[(3,)](x, y, 40, BLOCK=16)
    copy[(3,)](x, y, 41, BLOCK=16)  # 40 and 41: same types, neither a multiple of 16: the same specialisation
    assert len(compiles) == 1
    copy[(1,)](x, y, 32, BLOCK=32)  # 32 is a multiple of 16, and BLOCK changed: two new specialisations at once
    assert len(compiles) == 2
    entries = sorted((tmp_path / "cache" / "triton-gate").glob("*.json"))
    assert len(entries) == 2 and all(json.loads(p.read_text())["ok"] for p in entries)
    copy.__dict__.pop("_wb_gate")  # a new process: nothing in memory, the disk answers
    copy[(3,)](x, y, 40, BLOCK=16)
    assert len(compiles) == 2
    for p in entries:
        p.write_text("{trunc")  # a corrupt entry is compiled again, not trusted
    copy.__dict__.pop("_wb_gate")
    copy[(3,)](x, y, 40, BLOCK=16)
    assert len(compiles) == 3
    assert torch.equal(y[:40], x[:40])


HELPERS = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def helper(v):
        return v + 1

    @triton.jit
    def uses_helper(x_ptr):
        tl.store(x_ptr, helper(tl.load(x_ptr)))
''')

BAD_HELPER = textwrap.dedent('''
    import math

    @triton.jit
    def helper(v):
        return math.floor(v)
''')


NESTED = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def helper(v):
        return v + 1

    @triton.jit
    def middle(v):
        return helper(v) * 2

    @triton.jit
    def uses_middle(x_ptr):
        tl.store(x_ptr, middle(tl.load(x_ptr)))
''')


@pytest.mark.parametrize("cells, kernel, first", [(HELPERS, "uses_helper", 1.0), (NESTED, "uses_middle", 2.0)],
                         ids=["helper", "helper-of-a-helper"])
def test_a_redefined_helper_is_compiled_again(tmp_path, cells, kernel, first):
    """A notebook cell that redefines a @jit helper changes the kernel: the cached verdict must not hide it.

    The gate reuses each helper's JITFunction: one whose own helper was redefined must get a new cache key too.
    """
    src = tmp_path / "cell.py"
    src.write_text(cells + BAD_HELPER)
    ns: dict = {"__name__": "cell"}
    exec(compile(cells, str(src), "exec"), ns)  # noqa: S102  (a notebook's cells, one after another)
    x = torch.zeros(1)
    ns[kernel][(1,)](x)
    assert x.item() == first
    exec(compile("\n" * cells.count("\n") + BAD_HELPER, str(src), "exec"), ns)  # noqa: S102
    _refused(lambda: ns[kernel][(1,)](x), kernel)


def test_warmup_refuses_what_the_compile_refuses():
    _refused(lambda: dot_8x8.warmup(torch.randn(64), torch.zeros(64), grid=(1,)), "K >= 16")


def test_a_launch_missing_an_argument_names_the_kernel():
    with pytest.raises(TypeError, match=r"Triton kernel copy\(\) missing 1 required .*'BLOCK'"):
        copy[(1,)](torch.zeros(4), torch.zeros(4), 4)
