"""The Numba front-end gate: before the simulator runs a kernel, Numba's CUDA compiler (sm_90) must accept it.

Each refused kernel here is something the simulator would happily run as Python but a GPU cannot: a host helper
that is not a device function, ``time.time()``, a list comprehension, ``np.linalg``, a Python object, a write to a
read-only input. The refusal must carry Numba's own words and the kernel must not have run.
"""

from __future__ import annotations

import enum
import math
import time
import types
import weakref

import numpy as np
import pytest

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench import _numba_gate as gate
from workbench.cuda.errors import CompileError

pytestmark = requires_cpu_mode

if wb.mode() == "cpu":
    import numba
    from numba import cuda


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    """A fresh verdict cache on disk and in memory; the gate on (whatever the environment says)."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(gate.ENV, "1")
    monkeypatch.setattr(gate, "_VERDICTS", weakref.WeakKeyDictionary())
    return tmp_path / "numba-frontend"


def host_helper(x):
    return x + 1


class Knobs:
    scale = 2.0


KNOBS = Knobs()
SCALE = 3.0


class Op(enum.IntEnum):
    ADD = 1
    MUL = 2


OP = Op.MUL
USER_MODULE = types.ModuleType("my_helpers")  # a user's module: the compiler's process cannot import it by name
USER_MODULE.WIDTH = 3
USER_MODULE.host = host_helper
WEIGHTS = np.array([0.5, 2.0, 4.0], np.float32)
SHAPE = (2, 3)
TABLE = np.arange(200_000, dtype=np.float32)  # 800 KB: baked into the PTX it would take Numba tens of seconds


def refused_kernels():
    @cuda.jit
    def calls_host(out, a):
        i = cuda.threadIdx.x
        out[i] = host_helper(a[i])

    @cuda.jit
    def reads_clock(out, a):
        out[0] = time.time()

    @cuda.jit
    def comprehension(out, a):
        xs = [a[j] for j in range(3)]
        out[0] = xs[0]

    @cuda.jit
    def linalg(out, a):
        out[0] = np.linalg.norm(a)

    @cuda.jit
    def prints_array(out, a):
        print(a)

    @cuda.jit
    def python_object(out, a):
        out[0] = a[0] * KNOBS.scale

    return {
        "calls_host": (calls_host, "Untyped global name 'host_helper'"),
        "reads_clock": (reads_clock, "Unknown attribute 'time' of type Module(<module 'time'"),
        "comprehension": (comprehension, "Unknown attribute 'append' of type list"),
        "linalg": (linalg, "linear algebra"),
        "prints_array": (prints_array, "printing unimplemented for values of type array(float32, 1d, C)"),
        "python_object": (python_object, f"Untyped global name 'KNOBS': Cannot determine Numba type of <class "
                                         f"'{Knobs.__module__}.Knobs'>"),
    }


@pytest.mark.parametrize("name", ["calls_host", "reads_clock", "comprehension", "linalg", "prints_array",
                                  "python_object"])
def test_what_a_gpu_cannot_compile_is_refused_with_numbas_message(cold_cache, name):
    kernel, numba_says = refused_kernels()[name]
    out, a = np.full(4, -1.0, np.float32), np.arange(4, dtype=np.float32)
    with pytest.raises(CompileError) as info:
        kernel[1, 4](out, a)
    msg = str(info.value)
    assert f"kernel '{name}'" in msg and "does not compile for a GPU" in msg
    assert "Numba's CUDA compiler" in msg and "sm_90" in msg and numba_says in msg
    assert numba_says in info.value.log and info.value.path == __file__
    assert (out == -1).all()  # refused before the simulator ran a single thread


def test_a_write_to_a_read_only_input_is_refused_from_the_launch_signature(cold_cache):
    @cuda.jit
    def scribble(out, a):
        i = cuda.threadIdx.x
        a[i] = 0.0
        out[i] = 1.0

    out, a = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
    scribble[1, 4](out, a)  # writable: compiles
    a.flags.writeable = False
    with pytest.raises(CompileError, match=r"Cannot modify readonly array of type: readonly array\(float32, 1d, C\)"):
        scribble[1, 4](out, a)


def test_good_kernels_pass_and_the_verdict_is_cached_on_disk(cold_cache, monkeypatch):
    @cuda.jit(device=True)
    def twice(x):
        return 2 * x

    def factory(cuda):
        def call(out, a, n) -> None:
            tile = cuda.shared.array(4, numba.float32)
            i = cuda.grid(1)
            tile[cuda.threadIdx.x] = a[i] if i < n else 0.0
            cuda.syncthreads()
            if i < n:
                out[i] = twice(tile[cuda.threadIdx.x]) * SCALE + math.sqrt(4.0)
        return call

    kernel = cuda.jit(factory(cuda))
    out, a = np.zeros(6, np.float32), np.arange(6, dtype=np.float32)
    kernel[2, 4](out, a, 6)
    np.testing.assert_allclose(out, 6 * a + 2)
    files = list(cold_cache.rglob("*.json"))
    assert len(files) == 1 and '"ok": true' in files[0].read_text()

    monkeypatch.setattr(gate, "_VERDICTS", weakref.WeakKeyDictionary())  # a new process: only the disk remembers
    asked = []
    helper = gate._helper
    monkeypatch.setattr(gate, "_helper", lambda: asked.append(1) or helper())
    cuda.jit(factory(cuda))[2, 4](out, a, 6)
    assert asked == []  # a cached verdict needs no compiler
    kernel[2, 4](np.zeros(6, np.float64), a, 6)  # another signature is another compile
    assert asked == [1] and len(list(cold_cache.rglob("*.json"))) == 2


def test_globals_a_gpu_compiles_pass_the_gate(cold_cache):
    @cuda.jit
    def uses_globals(out, a):
        w = cuda.const.array_like(WEIGHTS)
        tile = cuda.shared.array(SHAPE, np.float32)
        i = cuda.threadIdx.x
        tile[0, i] = a[i] * w[i] if OP == Op.MUL else a[i] + w[i]
        out[i] = np.float32(tile[0, i])

    out, a = np.zeros(3, np.float32), np.ones(3, np.float32)
    uses_globals[1, 3](out, a)
    np.testing.assert_array_equal(out, WEIGHTS)
    assert '"ok": true' in next(cold_cache.rglob("*.json")).read_text()


def test_a_big_constant_table_is_compiled_by_its_type_not_its_bytes(cold_cache):
    @cuda.jit
    def lookup(out, idx):
        i = cuda.threadIdx.x
        out[i] = TABLE[idx[i]]

    out, idx = np.zeros(3, np.float32), np.array([5, 199_999, 0], np.int64)
    t0 = time.perf_counter()
    lookup[1, 3](out, idx)
    np.testing.assert_array_equal(out, TABLE[idx])
    assert time.perf_counter() - t0 < 15  # a stand-in of TABLE's type went to the compiler, not 800 KB
    desc = gate.describe_value(TABLE)
    assert desc[:4] == ("small", "<f4", 1, "C") and len(desc[4]) == 64


def test_a_module_the_compiler_cannot_import_is_sent_as_its_attributes(cold_cache):
    USER_MODULE.triple = cuda.jit(device=True)(lambda x: 3 * x)

    @cuda.jit
    def from_module(out, a):
        i = cuda.threadIdx.x
        if i < USER_MODULE.WIDTH:
            out[i] = USER_MODULE.triple(a[i])

    @cuda.jit
    def host_from_module(out, a):
        out[0] = USER_MODULE.host(a[0])

    out, a = np.zeros(4, np.float32), np.ones(4, np.float32)
    from_module[1, 4](out, a)
    np.testing.assert_array_equal(out, [3, 3, 3, 0])
    with pytest.raises(CompileError, match="host"):
        host_from_module[1, 1](out, a)


def test_the_cache_key_follows_code_values_and_signature(cold_cache, monkeypatch):
    def make(bias):
        @cuda.jit
        def shifted(out, a):
            i = cuda.threadIdx.x
            out[i] = a[i] + bias
        return shifted

    out, a = np.zeros(2, np.float32), np.ones(2, np.float32)
    make(1.0)[1, 2](out, a)
    make(1.0)[1, 2](out, a)  # same code, same cell value: same entry
    assert len(list(cold_cache.rglob("*.json"))) == 1
    make(2.0)[1, 2](out, a)  # the closure cell's value is part of the key
    make(1.0)[1, 2](out.astype(np.float64), a)  # so is the signature
    assert len(list(cold_cache.rglob("*.json"))) == 3


def test_opting_out_runs_simulator_only_code(cold_cache, monkeypatch):
    kernel, _ = refused_kernels()["calls_host"]
    out, a = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
    with gate.frontend(False):
        kernel[1, 4](out, a)
    np.testing.assert_array_equal(out, a + 1)
    monkeypatch.setenv(gate.ENV, "0")
    kernel[1, 4](out, a)
    monkeypatch.setenv(gate.ENV, "1")
    with pytest.raises(CompileError):
        kernel[1, 4](out, a)


def test_an_argument_the_gate_cannot_type_runs_with_a_warning(cold_cache):
    @cuda.jit
    def first(out, a):
        out[0] = a[0]

    out = np.zeros(1, np.float32)
    with pytest.warns(RuntimeWarning, match="kernel 'first': the front-end gate skipped it"):
        first[1, 1](out, [5.0])
    assert out[0] == 5.0


def test_without_the_compiler_the_launch_runs_and_a_warning_says_why(cold_cache, monkeypatch):
    def no_helper():
        raise gate._GateUnavailable("could not start python: no such file")

    monkeypatch.setattr(gate, "_helper", no_helper)
    monkeypatch.setattr(gate, "_WARNED", set())
    kernel, _ = refused_kernels()["calls_host"]
    out, a = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
    with pytest.warns(RuntimeWarning, match="front-end gate is unavailable.*could not start python"):
        kernel[1, 4](out, a)
    np.testing.assert_array_equal(out, a + 1)  # ran on the simulator, unchecked
    assert not list(cold_cache.rglob("*.json"))  # and no verdict was made up
