"""The CPU engine survives what a kernel does: traps, signals, host calls, wild and read-only writes, bad launch
sizes and corrupt cache entries each become an error naming the kernel, the thread and the line; the next launch
works."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="CPU-engine behaviour")

CU = Path(__file__).parent / "cuda"


def line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def faults():
    """tests/cuda/fault_kernels.cu, plain and checked."""
    from workbench import cuda

    return {"plain": cuda.RawModule(code=CU / "fault_kernels.cu").compile(),
            "checked": cuda.RawModule(code=CU / "fault_kernels.cu", checked=True).compile()}


def k(faults, name, checked=False):
    return faults["checked" if checked else "plain"].get_function(name)


def iota_still_works(faults):
    out = np.zeros(64, np.float32)
    k(faults, "iota")((2,), (32,), (out,))
    np.testing.assert_array_equal(out, np.arange(64))


# ------------------------------------------------------------------------------------------------ signals
def test_integer_division_by_zero_is_a_launch_error_and_the_next_launch_works(faults):
    from workbench.cuda import KernelLaunchError

    num, den, out = np.arange(64, dtype=np.int32), np.ones(64, np.int32), np.zeros(64, np.int32)
    den[5] = 0
    line = line_of(CU / "fault_kernels.cu", "out[i] = num[i] / den[i];")
    with pytest.raises(KernelLaunchError) as ei:
        k(faults, "div_by")((1,), (64,), (num, den, out, np.int32(64)))
    msg = str(ei.value)
    assert "'div_by'" in msg and "integer division by zero" in msg and "thread (5,0,0)" in msg
    assert "undefined behaviour" in msg and "does not trap" in msg and f"fault_kernels.cu:{line}" in msg
    den[5] = 1
    k(faults, "div_by")((1,), (64,), (num, den, out, np.int32(64)))
    np.testing.assert_array_equal(out, num)
    iota_still_works(faults)


@pytest.mark.parametrize("name, text", [("trap_if_negative", "__trap();"), ("ptx_trap", 'asm volatile("trap;");')])
def test_traps_are_illegal_instructions_with_thread_and_line(faults, name, text):
    from workbench.cuda import GpuOnlyError, KernelLaunchError

    x = np.ones(64, np.float32)
    k(faults, name)((1,), (64,), (x, np.int32(64)))
    x[3] = -1
    with pytest.raises(KernelLaunchError) as ei:
        k(faults, name)((1,), (64,), (x, np.int32(64)))
    assert not isinstance(ei.value, GpuOnlyError)
    msg = str(ei.value)
    assert f"'{name}'" in msg and "illegal instruction" in msg and "thread (3,0,0)" in msg
    assert "an illegal instruction was encountered" in msg
    assert f"fault_kernels.cu:{line_of(CU / 'fault_kernels.cu', text)}" in msg
    iota_still_works(faults)


def test_assert_without_include_is_a_device_side_assert(faults):
    from workbench.cuda import KernelLaunchError

    x = np.arange(64, dtype=np.int32)
    k(faults, "check_sorted")((1,), (64,), (x, np.int32(64)))
    x[10] = 0
    with pytest.raises(KernelLaunchError, match=r"device-side assert failed: x\[i\] <= x\[i \+ 1\].*thread \(9,0,0\).*"
                                               r"device-side assert triggered"):
        k(faults, "check_sorted")((1,), (64,), (x, np.int32(64)))


HOST_CALLS = r"""
#include <cstdlib>
#include <unistd.h>
#include <stdexcept>
extern "C" __global__ void call_exit(int* out) { if (threadIdx.x == 3) exit(3); out[threadIdx.x] = 1; }
extern "C" __global__ void call__exit(int* out) { if (threadIdx.x == 2) _exit(4); out[threadIdx.x] = 1; }
extern "C" __global__ void call_quick_exit(int* out) { if (threadIdx.x == 1) quick_exit(5); out[threadIdx.x] = 1; }
extern "C" __global__ void call_abort(int* out) { if (threadIdx.x == 4) abort(); out[threadIdx.x] = 1; }
extern "C" __global__ void builtin_trap(int* out) { if (threadIdx.x == 5) __builtin_trap(); out[threadIdx.x] = 1; }
extern "C" __global__ void throws(int* out) {
  if (threadIdx.x == 6) throw std::runtime_error("boom");
  out[threadIdx.x] = 1;
}
extern "C" __global__ void fine(int* out) { out[threadIdx.x] = 7; }
"""


@pytest.fixture(scope="module")
def host_calls():
    """Device code no GPU compiler accepts, built by the engine itself (no front-end gate in front of it)."""
    from workbench.cuda import _cpu, _source

    return _cpu.CpuModule(_source.Source(HOST_CALLS, None), (), None, (), False).compile()


@pytest.mark.parametrize("name, thread, pattern", [
    ("call_exit", 3, r"exit\(3\) called in device code.*cannot call host functions"),
    ("call__exit", 2, r"_exit\(4\) called in device code"),
    ("call_quick_exit", 1, r"quick_exit\(5\) called in device code"),
    ("call_abort", 4, r"abort\(\) called in device code"),
    ("builtin_trap", 5, r"illegal instruction \(SIGILL"),
    ("throws", 6, r"SIGABRT.*uncaught C\+\+ exception"),
])
def test_host_calls_and_signals_stop_the_launch_not_the_process(host_calls, name, thread, pattern):
    from workbench.cuda import KernelLaunchError, _cpu

    out = np.zeros(8, np.int32)
    with pytest.raises(KernelLaunchError, match=pattern) as ei:
        _cpu.launch(host_calls, host_calls.kernel(name), (1,), (8,), (out,), 0, 0)
    assert f"'{name}'" in str(ei.value) and f"thread ({thread},0,0)" in str(ei.value)
    _cpu.launch(host_calls, host_calls.kernel("fine"), (1,), (8,), (out,), 0, 0)
    np.testing.assert_array_equal(out, 7)


def test_host_calls_in_a_checked_launch_too():
    from workbench.cuda import KernelLaunchError, _cpu, _source

    mod = _cpu.CpuModule(_source.Source(HOST_CALLS, None), (), None, (), True).compile()
    out = np.zeros(8, np.int32)
    for name, pattern in (("call_exit", r"exit\(3\) called in device code"), ("throws", "SIGABRT"),
                          ("builtin_trap", "illegal instruction")):
        with pytest.raises(KernelLaunchError, match=pattern):
            _cpu.launch(mod, mod.kernel(name), (1,), (8,), (out,), 0, 0)
    _cpu.launch(mod, mod.kernel("fine"), (1,), (8,), (out,), 0, 0)
    np.testing.assert_array_equal(out, 7)


# ------------------------------------------------------------------------------------------------ wild accesses
def test_wild_write_hits_a_guard_page_instead_of_the_heap(faults):
    from workbench.cuda import KernelLaunchError

    out = np.zeros(64, np.float32)
    line = line_of(CU / "fault_kernels.cu", "out[threadIdx.x * stride] = 1.0f;")
    for _ in range(3):  # without the guard, this corrupts malloc's heap ("double free or corruption")
        with pytest.raises(KernelLaunchError) as ei:
            k(faults, "scatter_stride")((1,), (64,), (out, np.int32(1000)))
        msg = str(ei.value)
        assert "out-of-bounds write" in msg and "3744 bytes past the end of a 256-byte buffer" in msg
        assert "parameter 0 'out'" in msg and "thread (1,0,0)" in msg and f"fault_kernels.cu:{line}" in msg
        assert "an illegal memory access was encountered" in msg
    assert out[0] == 1  # what the launch wrote before it stopped is copied back
    iota_still_works(faults)


def test_wild_write_in_a_profile_launch_is_caught_too(faults):
    import workbench as wb
    from workbench.cuda import KernelLaunchError

    out = np.zeros(64, np.float32)
    with pytest.raises(KernelLaunchError, match=r"out-of-bounds write.*parameter 0 'out'"):
        wb.profile(lambda: k(faults, "scatter_stride")((1,), (64,), (out, np.int32(1000))))
    p = wb.profile(lambda: k(faults, "scatter_stride")((1,), (64,), (out, np.int32(1))))  # counted on the copies
    assert p["global store requests"] == 2 and p["global store sectors"] == 8 and not p.get("uncounted accesses")
    np.testing.assert_array_equal(out, 1)


def floats_at(n: int, aligned: bool) -> np.ndarray:
    """Return ``n`` zero floats whose address is a multiple of 256 bytes (``aligned``) or is not.

    An unchecked launch's copy of a buffer keeps the buffer's address mod 256 and ends within 256 bytes of a guard
    page: a 256-aligned 256-byte buffer ends right at the guard, any other has canary bytes after it. numpy's own
    alignment (16 or 64 bytes) would leave the path to chance.
    """
    base = np.zeros(n + 64, np.float32)
    start = next(i for i in range(64) if ((base[i:].ctypes.data % 256) == 0) == aligned)
    return base[start:start + n]


def test_small_overflow_is_caught_by_the_canary(faults):
    from workbench.cuda import KernelLaunchError

    out = floats_at(64, aligned=False)
    with pytest.raises(KernelLaunchError, match=r"out-of-bounds write: byte 0 past the end of a 256-byte buffer.*"
                                               r"canary.*parameter 0 'out'"):
        k(faults, "scatter_stride")((1,), (65,), (out, np.int32(1)))
    np.testing.assert_array_equal(out, 1)
    k(faults, "scatter_stride")((1,), (64,), (out, np.int32(1)))  # in bounds: fine


def test_small_overflow_of_a_256_aligned_buffer_hits_the_guard_page(faults):
    from workbench.cuda import KernelLaunchError

    out = floats_at(64, aligned=True)
    with pytest.raises(KernelLaunchError, match=r"out-of-bounds write, 0 bytes past the end of a 256-byte buffer "
                                               r"\(it hit the CPU engine's guard page.*parameter 0 'out'"):
        k(faults, "scatter_stride")((1,), (65,), (out, np.int32(1)))
    iota_still_works(faults)


def test_far_read_is_an_out_of_bounds_read(faults):
    from workbench.cuda import KernelLaunchError

    with pytest.raises(KernelLaunchError, match=r"out-of-bounds read, 399744 bytes past the end.*parameter 0 'in'"):
        k(faults, "gather_far")((1,), (64,), (np.zeros(64, np.float32), np.zeros(64, np.float32), np.int32(100000)))


def test_misaligned_float4_fails_checked_and_unchecked(faults):
    from workbench.cuda import KernelLaunchError, MemcheckError

    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    k(faults, "vec4_copy")((1,), (8,), (x, y, np.int32(4)))  # x + 4 is 16-byte aligned
    np.testing.assert_array_equal(y[:32], x[4:36])
    for name, size in (("vec4_copy", 16), ("vec2_copy", 8)):
        with pytest.raises(KernelLaunchError) as ei:
            k(faults, name)((1,), (8,), (x, y, np.int32(1)))
        msg = str(ei.value)
        assert f"misaligned address: a {size}-byte access" in msg and "thread (0,0,0)" in msg
        assert f"fault_kernels.cu:{line_of(CU / 'fault_kernels.cu', f'float{size // 4} v = ')}" in msg
        with pytest.raises(MemcheckError) as ei:
            k(faults, name, checked=True)((1,), (8,), (x, y, np.int32(1)))
        r = ei.value.records[0]
        assert r["kind"] == "misaligned access" and r["param"] == "x" and r["offset"] == 4 and r["size"] == size
    k(faults, "vec2_copy")((1,), (8,), (x, y, np.int32(2)))
    np.testing.assert_array_equal(y[:16], x[2:18])


def test_guarded_copies_keep_alignment_aliasing_and_results(faults):
    """The copies keep each buffer's address modulo 256 (a misaligned view stays misaligned) and aliasing."""
    from workbench.cuda import KernelLaunchError

    base = np.zeros(80, np.float32)
    view = base[1:]  # 4 bytes past a 16-byte boundary
    with pytest.raises(KernelLaunchError, match="misaligned address"):
        k(faults, "vec4_copy")((1,), (8,), (view, np.zeros(64, np.float32), np.int32(0)))
    x = np.arange(64, dtype=np.float32)
    k(faults, "scale_inplace")((1,), (64,), (x, np.float32(2), np.int32(64)))
    np.testing.assert_array_equal(x, 2 * np.arange(64))
    big = np.arange(40, dtype=np.float32)
    k(faults, "vec4_copy")((1,), (4,), (big, big[16:], np.int32(0)))  # overlapping arguments share one copy
    np.testing.assert_array_equal(big[16:32], np.arange(16))


# ------------------------------------------------------------------------------------------------ read-only arrays
@pytest.mark.parametrize("checked", [False, True])
def test_writing_a_read_only_array_names_the_parameter(faults, checked):
    from workbench.cuda import KernelArgumentError, KernelLaunchError, ReadOnlyArgumentError

    x = np.ones(64, np.float32)
    x.flags.writeable = False
    with pytest.raises(ReadOnlyArgumentError) as ei:
        k(faults, "scale_inplace", checked)((1,), (64,), (x, np.float32(2), np.int32(64)))
    e = ei.value
    assert isinstance(e, KernelArgumentError) and isinstance(e, KernelLaunchError) and e.param == "x"
    assert "parameter 0 'x' (float*)" in str(e) and "writeable=False" in str(e) and "thread (0,0,0)" in str(e)
    np.testing.assert_array_equal(x, 1)
    out = np.zeros(1, np.float32)
    k(faults, "sum_nonconst", checked)((1,), (32,), (x, out, np.int32(64)))  # read-only, only read: fine
    assert out[0] == 64


def test_tensor_that_requires_grad_is_refused_like_cupy(faults):
    torch = pytest.importorskip("torch")
    from workbench.cuda import KernelArgumentError

    t = torch.ones(64, requires_grad=True)
    with pytest.raises(KernelArgumentError, match=r"parameter 0 'x'.*requires grad.*detach\(\)"):
        k(faults, "scale_inplace")((1,), (64,), (t, np.float32(2), np.int32(64)))
    d = t.detach()
    k(faults, "scale_inplace")((1,), (64,), (d, np.float32(2), np.int32(64)))
    assert float(t.detach().sum()) == 128


# ------------------------------------------------------------------------------------------------ launch sizes
@pytest.mark.parametrize("grid, block, pattern", [
    ((2.0,), (32,), r"grid \(2\.0,\) holds 2\.0 \(float\).*'float' object cannot be interpreted as an integer"),
    ((2,), (32.0,), r"block \(32\.0,\) holds 32\.0 \(float\)"),
    ((2,), (np.float32(32),), r"block .* holds np\.float32\(32\.0\) \(float32\)"),
    ((True,), (32,), r"grid \(True,\) holds the bool True"),
    (2, (np.bool_(True), 32), r"block .* holds the bool np\.True_"),
])
def test_float_and_bool_launch_sizes_are_refused(faults, grid, block, pattern):
    from workbench.cuda import LaunchConfigError

    with pytest.raises(LaunchConfigError, match=r"'iota'.*" + pattern):
        k(faults, "iota")(grid, block, (np.zeros(64, np.float32),))
    iota_still_works(faults)


# ------------------------------------------------------------------------------------------------ compile cache
SRC = 'extern "C" __global__ void plus1(float* x) { x[threadIdx.x] += 1.0f; }\n'


@pytest.mark.parametrize("damage", ["truncate", "garbage", "garbage without digest"])
def test_corrupt_cached_module_is_rebuilt(damage, monkeypatch):
    from workbench.cuda import _cpu, _cpu_build, _source

    src = _source.Source(SRC + f"// {damage}\n", None)
    with monkeypatch.context() as m:  # build into the cache without loading it (as an earlier process would)
        m.setattr(_cpu.CpuModule, "_load", lambda self, so: setattr(self, "so_path", str(so)))
        so = Path(_cpu.CpuModule(src, (), None, (), False).compile().so_path)
    if damage == "truncate":
        so.write_bytes(so.read_bytes()[:1000])
    else:
        so.write_bytes(b"\x7fELF" + os.urandom(so.stat().st_size - 4))
        if damage == "garbage without digest":
            _cpu_build._digest_path(so).unlink()
    mod = _cpu.CpuModule(src, (), None, (), False).compile()
    x = np.zeros(32, np.float32)
    _cpu.launch(mod, mod.kernel("plus1"), (1,), (32,), (x,), 0, 0)
    np.testing.assert_array_equal(x, 1)
    assert mod.so_path == str(so) and _cpu_build._intact(so) and _cpu_build._digest_path(so).exists()


def test_corrupt_cached_library_is_rebuilt_once(tmp_path):
    """The runtime library's loader: a truncated or garbage file is rebuilt; a build that stays broken raises."""
    from workbench.cuda import CompileError, _cpu_build
    from workbench.cuda.toolchain import find_cxx

    builds = []

    def build(so):
        builds.append(so.name)
        tmp = tmp_path / "lib.tmp"
        r = _cpu_build._run_compiler([find_cxx(), "-shared", "-fPIC", "-x", "c++", "-", "-o", str(tmp)],
                                     "a test library", stdin='extern "C" int answer() { return 42; }\n')
        assert r.returncode == 0, r.stderr
        _cpu_build._write_digest(tmp, so)
        os.replace(tmp, so)

    truncated, garbage = tmp_path / "truncated.so", tmp_path / "garbage.so"
    for so in (truncated, garbage):
        build(so)
    truncated.write_bytes(truncated.read_bytes()[:100])
    garbage.write_bytes(b"\x7fELF" + bytes(200))
    _cpu_build._digest_path(garbage).unlink()  # no digest: only dlopen's failure tells
    for so in (truncated, garbage):
        assert _cpu_build._load_verified(so, lambda so=so: build(so), "a test library").answer() == 42
    assert builds == ["truncated.so", "garbage.so", "truncated.so", "garbage.so"]

    bad = tmp_path / "bad.so"
    with pytest.raises(CompileError, match="rebuilt but does not load"):
        _cpu_build._load_verified(bad, lambda: bad.write_bytes(b"not a library"), "a broken library")
