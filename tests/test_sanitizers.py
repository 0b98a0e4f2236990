"""The CPU engine's compute-sanitizer: memcheck, racecheck, initcheck; stopping launches; GPU limits; odd names."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="CPU-engine behaviour")

CU = Path(__file__).parent / "cuda"
ROOT = Path(__file__).resolve().parent.parent
rng = np.random.default_rng(0)


def f32(n):
    return rng.standard_normal(n).astype(np.float32)


def i32(v):
    return np.int32(v)


@pytest.fixture(scope="module")
def san():
    """tests/cuda/sanitize.cu built twice: checked and plain."""
    from workbench import cuda

    return {"checked": cuda.RawModule(code=CU / "sanitize.cu", checked=True).compile(),
            "plain": cuda.RawModule(code=CU / "sanitize.cu").compile()}


def checked(san, name):
    return san["checked"].get_function(name)


def plain(san, name):
    return san["plain"].get_function(name)


def line_of(path: Path, text: str) -> int:
    """Return the 1-based line of the first line of ``path`` containing ``text``."""
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


@pytest.fixture
def limits():
    """Restore the time limit and the size guard after a test changes them."""
    from workbench.cuda import _limits

    saved = dict(_limits._chosen)
    yield _limits
    _limits._chosen.clear()
    _limits._chosen.update(saved)


# ------------------------------------------------------------------------------------------------ memcheck
def test_missing_tail_guard_is_out_of_bounds_with_thread_block_offset_line(san):
    from workbench.cuda import MemcheckError

    n = 1000
    a, b, c = f32(n), f32(n), np.zeros(n, np.float32)
    with pytest.raises(MemcheckError) as ei:
        checked(san, "add_no_guard")((4,), (256,), (a, b, c, i32(n)))
    e = ei.value
    assert e.tool == "memcheck" and e.total == 3 * 24  # 24 threads past the end, each reads a, b and writes c
    r = e.records[0]
    line = line_of(CU / "sanitize.cu", "c[i] = a[i] + b[i];")
    assert (r["space"], r["kind"], r["param"], r["offset"], r["size"], r["buffer_bytes"]) == \
        ("global", "read", "a", 4000, 4, 4000)
    assert r["block"] == (3, 0, 0) and r["thread"] == (232, 0, 0) and r["line"] == line
    assert r["file"].endswith("sanitize.cu")
    assert {x["kind"] for x in e.records} == {"read", "write"}
    msg = str(e)
    assert "add_no_guard" in msg and "(232, 0, 0)" in msg and "(3, 0, 0)" in msg and f"sanitize.cu:{line}" in msg
    np.testing.assert_allclose(c, a + b)  # the valid threads' results are there


def test_sanitizing_switch_checks_every_launch_and_nothing_crashes():
    """The checker's switch turns a plain kernel into a checked one: the classic missing `if (i < n)`."""
    from workbench import _sanitize, cuda

    src = ('extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {\n'
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  c[i] = a[i] + b[i];\n}\n")
    k = cuda.RawKernel(src, "add")
    a, b = f32(100), f32(100)
    c = np.zeros(100, np.float32)
    with _sanitize.sanitizing(), pytest.raises(cuda.MemcheckError) as ei:
        k((1,), (128,), (a, b, c, i32(100)))
    r = ei.value.records[0]
    assert r["thread"] == (100, 0, 0) and r["offset"] == 400 and r["line"] == 3 and r["param"] == "a"
    big = np.zeros(128, np.float32)  # outside the switch: a plain launch (on a buffer big enough for it)
    k((1,), (128,), (np.zeros(128, np.float32), np.zeros(128, np.float32), big, i32(100)))


def test_misaligned_vector_load(san):
    from workbench.cuda import MemcheckError

    with pytest.raises(MemcheckError) as ei:
        checked(san, "misaligned_vec4")((1,), (8,), (f32(64), np.zeros(8, np.float32)))
    r = ei.value.records[0]
    assert r["kind"] == "misaligned access" and r["size"] == 16 and r["param"] == "in" and r["offset"] == 4
    assert "Misaligned address" in str(ei.value)


def test_shared_memory_out_of_bounds_static_and_dynamic(san):
    from workbench.cuda import MemcheckError

    with pytest.raises(MemcheckError) as ei:
        checked(san, "smem_overflow")((1,), (64,), (f32(64), np.zeros(64, np.float32)))
    r = ei.value.records[0]
    assert (r["space"], r["window"], r["kind"], r["variable"], r["thread"]) == ("shared", "static", "write", "s",
                                                                                (32, 0, 0))
    assert r["variable_offset"] == 128 and r["line"] == line_of(CU / "sanitize.cu", "s[threadIdx.x] = in[")
    with pytest.raises(MemcheckError) as ei:
        checked(san, "dyn_overflow")((1,), (32,), (f32(32), np.zeros(32, np.float32)), shared_mem=128)
    r = ei.value.records[0]
    assert (r["space"], r["window"], r["variable"], r["offset"], r["buffer_bytes"], r["thread"]) == \
        ("shared", "dynamic", "buf", 128, 128, (31, 0, 0))
    assert "extern __shared__ buf" in str(ei.value)


def test_wild_access_and_stack_overflow_fail_the_launch_not_the_process(san):
    from workbench import cuda

    x = np.zeros(64, np.float32)
    pat = r"'wild_write'.*segmentation fault.*thread \(1,0,0\).*checked=True"
    with pytest.raises(cuda.KernelLaunchError, match=pat):
        plain(san, "wild_write")((1,), (4,), (x, np.int64(1 << 40)))
    with pytest.raises(cuda.MemcheckError, match=r"(?s)far from every buffer.*sanitize\.cu:\d+") as ei:
        checked(san, "wild_write")((1,), (4,), (x, np.int64(1 << 40)))
    assert ei.value.records[0]["kind"] == "wild access" and ei.value.records[0]["thread"] == (1, 0, 0)
    for mod in (plain, checked):
        with pytest.raises(cuda.KernelLaunchError, match=r"'endless_recursion'.*stack overflow.*256 KiB"):
            mod(san, "endless_recursion")((1,), (4,), (np.zeros(4, np.int32),))
        o = np.zeros(64, np.float32)
        mod(san, "iota")((1,), (64,), (o,))
        np.testing.assert_array_equal(o, np.arange(64))


# ------------------------------------------------------------------------------------------------ initcheck
def test_shared_memory_starts_as_garbage(san):
    f, i, h = np.zeros(32, np.float32), np.zeros(32, np.int32), np.zeros(32, np.float16)
    plain(san, "read_garbage")((1,), (32,), (f, i, h))
    assert np.isnan(f).all() and (i == -1).all() and np.isnan(h).all()


def test_initcheck_reports_reads_of_unwritten_shared_memory(san):
    from workbench.cuda import UninitializedError

    with pytest.raises(UninitializedError) as ei:
        checked(san, "uninit_read")((1,), (64,), (np.zeros(64, np.float32),))
    e = ei.value
    assert e.tool == "initcheck" and e.total == 32
    r = e.records[0]
    assert (r["space"], r["variable"], r["size"]) == ("shared", "s", 4) and 128 <= r["variable_offset"] < 256
    assert r["thread"][0] >= 32 and r["line"] == line_of(CU / "sanitize.cu", "// ...but read here")
    with pytest.raises(UninitializedError, match="counts"):  # an atomicAdd on a counter nobody zeroed
        checked(san, "uninit_int")((1,), (64,), (np.zeros(8, np.int32),))


# ------------------------------------------------------------------------------------------------ racecheck
def test_racy_counter_is_a_global_race(san):
    from workbench.cuda import RaceError

    c = np.zeros(1, np.int32)
    plain(san, "racy_counter")((64,), (256,), (c,))
    # A plain launch gives anything up to 16384: one worker thread's interleaving hides the bug, two workers
    # sometimes lose increments (15531 seen on a busy machine)...
    assert 0 < c[0] <= 16384
    c[:] = 0
    with pytest.raises(RaceError) as ei:  # ...racecheck does not
        checked(san, "racy_counter")((64,), (256,), (c,))
    e = ei.value
    assert e.tool == "racecheck"
    r = e.records[0]
    line = line_of(CU / "sanitize.cu", "c[0] = c[0] + 1;")
    assert r["space"] == "global" and r["param"] == "c" and r["offset"] == 0 and r["hazard"] in ("RAW", "WAR", "WAW")
    assert r["first"]["line"] == r["second"]["line"] == line and r["first"]["thread"] != r["second"]["thread"]
    assert {x["hazard"] for x in e.records} == {"RAW", "WAR", "WAW"}
    c[:] = 0
    checked(san, "atomic_counter")((64,), (256,), (c,))  # the atomic version is clean
    assert c[0] == 16384


def test_race_reports_are_deterministic(san):
    from workbench.cuda import RaceError

    seen = []
    for _ in range(2):
        with pytest.raises(RaceError) as ei:
            checked(san, "racy_counter")((8,), (64,), (np.zeros(1, np.int32),))
        seen.append((ei.value.total, ei.value.records))
    assert seen[0] == seen[1]


def test_reading_what_another_block_wrote_is_a_race(san):
    from workbench.cuda import RaceError

    with pytest.raises(RaceError) as ei:
        checked(san, "cross_block")((2,), (64,), (np.zeros(128, np.float32),))
    r = ei.value.records[0]
    assert r["hazard"] == "RAW" and r["first"]["block"] == (0, 0, 0) and r["second"]["block"] == (1, 0, 0)
    assert "blocks are never ordered" in str(ei.value)


def test_missing_syncthreads_in_conformance_kernel(san):
    from workbench import cuda

    bugs = cuda.RawModule(code=CU / "bugs.cu", checked=True, frontend=False)  # <assert.h>: NVRTC has none
    x, out = f32(512), np.zeros(512, np.float32)
    with pytest.raises(cuda.RaceError) as ei:
        bugs.get_function("reverse_nosync")((2,), (256,), (x, out))
    write_line = line_of(CU / "bugs.cu", "s[t] = in[base + t];")
    read_line = line_of(CU / "bugs.cu", "out[base + t] = s[blockDim.x - 1 - t];")
    pairs = {(r["hazard"], r["first"]["line"], r["second"]["line"]) for r in ei.value.records}
    assert pairs == {("WAR", read_line, write_line), ("RAW", write_line, read_line)}
    r = ei.value.records[0]
    assert r["space"] == "shared" and r["variable"] == "s" and "no __syncthreads() between them" in str(ei.value)
    assert ei.value.reports["initcheck"][1] > 0  # the early readers also read unwritten memory
    bugs.get_function("reverse_sync")((2,), (256,), (x, out))


@pytest.mark.parametrize("kernel, block, make", [
    ("warp_neighbour", 32, lambda: (f32(32), np.zeros(32, np.float32))),
    ("tree_sum", 64, lambda: (f32(64), np.zeros(1, np.float32))),
])
def test_lanes_of_a_warp_race_unless_syncwarp_separates_them(san, kernel, block, make):
    from workbench.cuda import RaceError

    with pytest.raises(RaceError) as ei:
        checked(san, kernel)((1,), (block,), (*make(), i32(0)))
    r = ei.value.records[0]
    assert r["first"]["warp"] == r["second"]["warp"] == 0 and "no __syncwarp() or __syncthreads()" in str(ei.value)
    checked(san, kernel)((1,), (block,), (*make(), i32(1)))  # with __syncwarp: clean


@pytest.mark.parametrize("block", [64, 512])
def test_a_reduction_helper_called_twice_without_a_barrier_is_a_war_race(san, block):
    """Every thread reads the first call's part[0]; the second call's thread 0 rewrites it while other warps read."""
    from workbench.cuda import RaceError

    out = np.zeros(block, np.float32)
    with pytest.raises(RaceError) as ei:
        checked(san, "two_slot_sums")((1,), (block,), (out, i32(0)))
    read_line = line_of(CU / "sanitize.cu", "return part[0];  // slot_sum")
    write_line = line_of(CU / "sanitize.cu", "part[warp] = v;  // slot_sum")
    war = [r for r in ei.value.records if r["hazard"] == "WAR"]
    assert war, ei.value.records
    r = war[0]
    assert r["space"] == "shared" and r["variable"] == "part" and r["variable_offset"] == 0
    assert (r["first"]["line"], r["second"]["line"]) == (read_line, write_line)
    assert r["first"]["warp"] != r["second"]["warp"] and r["second"]["thread"] == (0, 0, 0)
    checked(san, "two_slot_sums")((1,), (block,), (out, i32(1)))  # a barrier between the calls: clean
    np.testing.assert_array_equal(out, block + block * (block - 1) / 2)


def test_layernorm_block_without_its_barrier_between_block_sums_is_a_race():
    """kernels/layernorm/cu/layernorm_block.cu calls block_sum twice; without the barrier between them it races."""
    from workbench import cuda
    from workbench.cuda import RaceError

    src = (ROOT / "kernels" / "layernorm" / "cu" / "layernorm_block.cu").read_text()
    inc = '"../../include/kernel_helpers.cuh"'
    barrier = [ln for ln in src.splitlines(keepends=True) if "__syncthreads();  // block_sum reuses" in ln]
    assert inc in src and len(barrier) == 1
    src = src.replace(inc, '"' + (ROOT / "kernels" / "include" / "kernel_helpers.cuh").as_posix() + '"')
    n, rows = 4097, 2
    x = f32(rows * n)
    w, b, y = np.ones(n, np.float32), np.zeros(n, np.float32), np.zeros(rows * n, np.float32)
    args = (x, w, b, y, i32(n), np.float32(1e-5))
    with pytest.raises(RaceError) as ei:
        cuda.RawKernel(src.replace(barrier[0], ""), "layernorm_block_f32", checked=True)((rows,), (512,), args)
    assert any(r["hazard"] == "WAR" and r["variable"] == "part" and r["first"]["file"].endswith("kernel_helpers.cuh")
               for r in ei.value.records)
    cuda.RawKernel(src, "layernorm_block_f32", checked=True)((rows,), (512,), args)  # with it: clean
    xs = x.reshape(rows, n).astype(np.float64)
    ref = (xs - xs.mean(1, keepdims=True)) / np.sqrt(xs.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.reshape(rows, n), ref, rtol=1e-4, atol=1e-4)


def test_double_buffering_padding_shuffles_and_atomics_are_clean(san):
    from workbench import cuda
    from workbench.cuda import RaceError

    x = f32(64 * 5)
    out = np.zeros(64, np.float32)
    checked(san, "double_buffered")((1,), (64,), (x, out, i32(5)))
    np.testing.assert_allclose(out, x.reshape(5, 64)[:, ::-1].sum(0), rtol=1e-5, atol=1e-5)
    with pytest.raises(RaceError) as ei:  # the same without the barrier between the steps
        checked(san, "double_buffered_nosync")((1,), (64,), (x, out, i32(5)))
    assert {r["hazard"] for r in ei.value.records} >= {"WAR"}
    y = f32(512)
    s = np.zeros(2, np.float32)
    checked(san, "shuffle_sum")((2,), (256,), (y, s))
    np.testing.assert_allclose(s, y.reshape(2, 256).sum(1), rtol=1e-4, atol=1e-4)
    data = rng.integers(0, 1000, 5000).astype(np.int32)
    bins = np.zeros(16, np.int32)
    checked(san, "smem_histogram")((4,), (128,), (data, bins, i32(data.size)))
    np.testing.assert_array_equal(bins, np.bincount(data & 15, minlength=16))
    conf = {f: cuda.RawModule(code=CU / f"{f}.cu", checked=True) for f in ("transpose", "warp_reduce")}
    w, h = 70, 45
    a = f32(w * h).reshape(h, w)
    t = np.zeros((w, h), np.float32)
    conf["transpose"].get_function("transpose_padded")(((w + 31) // 32, (h + 31) // 32), (32, 8),
                                                        (a, t, i32(w), i32(h)))
    np.testing.assert_array_equal(t, a.T)
    v = f32(1000)
    o = np.zeros(4, np.float32)
    conf["warp_reduce"].get_function("block_sum")((4,), (256,), (v, o, i32(1000)))
    np.testing.assert_allclose(o, np.add.reduceat(v, [0, 256, 512, 768]), rtol=1e-4, atol=1e-4)


def test_known_wrong_gemm_missing_syncthreads_is_a_race_with_its_lines():
    import workbench as wb
    from workbench import _sanitize
    from workbench.cuda import RaceError

    v = next(x for x in wb.variants("gemm", include_wrong=True) if x.name == "wrong_missing_syncthreads")
    a, b = wb.make_inputs("gemm", M=40, N=40, K=40)
    with _sanitize.sanitizing(), pytest.raises(RaceError) as ei:
        v(a, b)
    cu = ROOT / "kernels" / "gemm" / "cu" / "wrong_gemm.cu"
    text = cu.read_text().splitlines()
    else_at = next(i for i, ln in enumerate(text, 1) if "} else {" in ln)
    edge_lines = set(range(else_at + 1, else_at + 6))  # the guarded path without its two barriers
    recs = ei.value.records
    assert all(r["space"] == "shared" and r["variable"] in ("As", "Bs") for r in recs)
    assert all(r["first"]["line"] in edge_lines and r["second"]["line"] in edge_lines for r in recs)
    assert all(r["first"]["file"].endswith("wrong_gemm.cu") for r in recs)
    assert {r["hazard"] for r in recs} >= {"RAW", "WAR"}
    assert "wrong_gemm.cu:" in str(ei.value)


def _cuda_variants():
    import kernels  # noqa: F401  (registers every op)
    import workbench as wb
    from workbench.registry import _OPS, get_op

    out = []
    for op in sorted(_OPS):
        get_op(op)
        for v in wb.variants(op, backend="cuda", runnable=True):
            out.append(pytest.param(op, v.name, id=f"{op}/{v.name}"))
    return out


@pytest.mark.parametrize("op, name", _cuda_variants())
def test_every_correct_cuda_variant_runs_clean_under_the_sanitizers(op, name):
    """memcheck, racecheck and initcheck find nothing in the registered CUDA C variants (small ragged shapes)."""
    import torch

    import workbench as wb
    from workbench import _sanitize
    from workbench.registry import get_op

    spec = get_op(op)
    v = next(x for x in wb.variants(op, backend="cuda") if x.name == name)
    dtypes = [d for d in (torch.float32, torch.float16) if d in (v.dtypes or spec.dtypes)] or \
        list(v.dtypes or spec.dtypes)[:1]
    ran = 0
    for dt in dtypes:
        for shape in spec.check_shapes[1:3]:  # the ragged ones: partial tiles, tails
            if not v.runs_here(dt, shape):
                continue
            sizes, kw = spec.split(shape)
            inputs = wb.make_inputs(op, dtype=dt, seed=1, **shape)
            with _sanitize.sanitizing():
                v(*inputs, **kw)
            ran += 1
    assert ran, f"{op}/{name} ran at none of the shapes"


# ------------------------------------------------------------------------------------------------ stopping
def test_time_limit_stops_an_endless_loop_and_the_module_stays_usable(san, limits):
    from workbench import cuda

    flag = np.zeros(1, np.int32)
    out = np.zeros(64, np.float32)
    cuda.set_time_limit(0.5)
    for mod, name, args in [(plain, "spin", (flag, out)), (plain, "spin_barrier", (flag,)),
                            (checked, "spin", (flag, out))]:
        fn = mod(san, name)
        t = time.perf_counter()
        with pytest.raises(cuda.LaunchTimeoutError, match=rf"'{name}'.*time limit of 0.5 s.*set_time_limit"):
            fn((2,), (64,), args)
        assert time.perf_counter() - t < 2.5
        o = np.zeros(64, np.float32)
        mod(san, "iota")((1,), (64,), (o,))
        np.testing.assert_array_equal(o, np.arange(64))


def test_ctrl_c_interrupts_a_launch_within_a_second(san, limits):
    from workbench import cuda

    cuda.set_time_limit(20)  # a safety net: the interrupt must come first
    flag = np.zeros(1, np.int32)
    out = np.zeros(64, np.float32)
    fn = plain(san, "spin")
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    t = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        fn((4,), (64,), (flag, out))
    assert time.perf_counter() - t < 0.3 + 1.0
    timer.join()
    o = np.zeros(64, np.float32)
    plain(san, "iota")((1,), (64,), (o,))
    np.testing.assert_array_equal(o, np.arange(64))


def test_size_guard_refuses_launches_that_would_take_minutes(san, limits):
    from workbench import cuda

    cuda.set_size_guard(2.0)
    out = np.zeros(4096 * 256, np.float32)
    t = time.perf_counter()
    with pytest.raises(cuda.LaunchTooLargeError) as ei:
        plain(san, "busy")((4096,), (256,), (out, i32(200_000)))
    assert time.perf_counter() - t < 2.0
    msg = str(ei.value)
    assert "'busy'" in msg and "would take" in msg and "size guard of 2 s" in msg and "set_size_guard" in msg
    cuda.set_size_guard(None)  # the documented override
    plain(san, "busy")((4,), (32,), (out, i32(1000)))


def test_readme_sized_naive_gemm_is_refused_up_front(limits):
    import workbench as wb
    from workbench import cuda

    limits._chosen.pop("size_guard", None)  # the default guard
    v = next(x for x in wb.variants("gemm") if x.name == "cuda_naive")
    a, b = wb.make_inputs("gemm", M=4096, N=4096, K=4096)
    t = time.perf_counter()
    with pytest.raises(cuda.LaunchTooLargeError, match=r"sgemm_naive_f32.*would take .*(min|h) on the CPU engine"):
        v(a, b)
    assert time.perf_counter() - t < 10


def test_limit_settings_and_environment(limits, monkeypatch):
    from workbench import cuda

    monkeypatch.setenv("WORKBENCH_CUDA_TIME_LIMIT", "12.5")
    monkeypatch.setenv("WORKBENCH_CUDA_SIZE_GUARD", "off")
    limits._chosen.clear()  # neither set in this process: the environment decides
    assert cuda.time_limit() == 12.5 and cuda.size_guard() is None
    monkeypatch.setenv("WORKBENCH_CUDA_TIME_LIMIT", "soon")
    with pytest.raises(ValueError, match="WORKBENCH_CUDA_TIME_LIMIT"):
        cuda.time_limit()
    cuda.set_time_limit(3)
    assert cuda.time_limit() == 3.0
    cuda.set_time_limit(None)
    assert cuda.time_limit() is None
    with pytest.raises(ValueError):
        cuda.set_size_guard(-1)
    with pytest.raises(TypeError):
        cuda.set_time_limit([3])  # type: ignore[arg-type]
    cuda.set_size_guard("none")  # type: ignore[arg-type]  (strings as in the environment variable)
    assert cuda.size_guard() is None


# ------------------------------------------------------------------------------------------------ GPU limits
BIG_STATIC = r"""
extern "C" __global__ void big(float* x) { __shared__ float s[40960]; s[threadIdx.x] = 1; __syncthreads();
  x[threadIdx.x] = s[threadIdx.x]; }
"""
TWO_40K = r"""
extern "C" __global__ void a(float* x) { __shared__ float s[10000]; s[threadIdx.x] = 1; __syncthreads();
  x[threadIdx.x] = s[threadIdx.x]; }
extern "C" __global__ void b(float* x) { __shared__ float t[10000]; t[threadIdx.x] = 2; __syncthreads();
  x[threadIdx.x] = t[threadIdx.x]; }
template <int N> __device__ float stage(float v) { __shared__ float u[N]; u[threadIdx.x] = v; __syncthreads();
  return u[threadIdx.x]; }
extern "C" __global__ void c(float* x) { x[threadIdx.x] = stage<10000>(3.0f); }
extern "C" __global__ void d(float* x) { x[threadIdx.x] = stage<10001>(4.0f); }
extern "C" __global__ void dyn(float* x) { extern __shared__ float m[]; m[threadIdx.x] = 5; __syncthreads();
  x[threadIdx.x] = m[threadIdx.x]; }
"""


def test_static_shared_memory_over_48k_is_refused_like_ptxas():
    from workbench import cuda

    with pytest.raises(cuda.CompileError, match=r"entry function 'big' uses too much shared data \(0x28000 bytes, "
                                                r"0xc000 max\).*extern __shared__.*max_dynamic_shared_size_bytes"):
        cuda.RawModule(code=BIG_STATIC).compile()


def test_shared_memory_is_counted_per_kernel():
    """Four kernels of ~40 KB each (two through template helpers) fit, as on a GPU: 48 KB is per kernel."""
    from workbench import cuda

    m = cuda.RawModule(code=TWO_40K)
    x = np.zeros(8, np.float32)
    for name, val in [("a", 1), ("b", 2), ("c", 3), ("d", 4)]:
        m.get_function(name)((1,), (8,), (x,))
        assert (x == val).all()


def test_dynamic_shared_memory_limits_follow_the_arch_table():
    from workbench import cuda
    from workbench.cuda import arch

    f = cuda.RawModule(code=TWO_40K).get_function("dyn")
    x = np.zeros(8, np.float32)
    with pytest.raises(cuda.LaunchConfigError, match=r"shared_mem=65536.*max_dynamic_shared_size_bytes"):
        f((1,), (8,), (x,), shared_mem=64 * 1024)
    with pytest.raises(cuda.LaunchConfigError, match=r"1048576.*more than the 232448 B.*sm_90"):
        f((1,), (8,), (x,), shared_mem=1 << 20)
    f.max_dynamic_shared_size_bytes = 1 << 20
    with pytest.raises(cuda.LaunchConfigError, match=r"max_dynamic_shared_size_bytes = 1048576 is more than sm_90"):
        f((1,), (8,), (x,), shared_mem=1024)
    f.max_dynamic_shared_size_bytes = arch.get("sm_90").max_smem_per_block
    f((1,), (8,), (x,), shared_mem=arch.get("sm_90").max_smem_per_block)  # 227 KB with the opt-in: fine
    assert (x == 5).all()
    g = cuda.RawModule(code=TWO_40K, options=("-arch=sm_80",)).get_function("dyn")
    g.max_dynamic_shared_size_bytes = 200 * 1024
    with pytest.raises(cuda.LaunchConfigError, match=r"sm_80 allows.*166912 B"):
        g((1,), (8,), (x,), shared_mem=200 * 1024)


# ------------------------------------------------------------------------------------------------ kernel names
LIBC_NAMES = ["time", "write", "read", "sync", "sleep", "pause", "kill", "div", "exp", "abs", "rand", "round",
              "sqrt", "index", "malloc", "printf", "exit", "memcpy"]


@pytest.fixture(scope="module")
def libc_named():
    from workbench import cuda

    src = "\n".join(f'extern "C" __global__ void {n}(float* x, int n) {{ int i = threadIdx.x; if (i < n) '
                    f"x[i] = {j} + sqrtf((float)(i * i)); }}" for j, n in enumerate(LIBC_NAMES))
    # frontend=False: NVRTC refuses kernels named exp, abs, round, sqrt, malloc or printf (CUDA's own device
    # functions); the engine's renaming of such kernels is what this probes
    return cuda.RawModule(code=src, frontend=False).compile()


@pytest.mark.parametrize("name", LIBC_NAMES)
def test_kernels_named_like_libc_functions_run_the_kernel(libc_named, name):
    x = np.zeros(8, np.float32)
    libc_named.get_function(name)((1,), (8,), (x, i32(8)))
    np.testing.assert_array_equal(x, LIBC_NAMES.index(name) + np.arange(8, dtype=np.float32))


def test_libc_named_kernel_in_checked_mode_and_by_file(tmp_path):
    from workbench import cuda

    p = tmp_path / "write.cu"
    p.write_text('#include <cuda_fp16.h>\nextern "C" __global__ void write(float* x) { x[threadIdx.x] = '
                 "expf(0.0f) + threadIdx.x; }\n")
    x = np.zeros(4, np.float32)
    cuda.RawKernel(p, "write", checked=True)((1,), (4,), (x,))
    np.testing.assert_array_equal(x, 1 + np.arange(4, dtype=np.float32))


def test_the_hooks_are_built_once_and_linked_into_each_checked_or_profile_module(san, monkeypatch):
    """wb_sanitize.h's hooks live in one object per kind of build: a module's own code only calls them, and each
    module links its own hidden copy (so a checked module still reports, as the tests above show).

    The cache may also hold hook objects of other header states (an edited header gives a new key): the test asks
    for the one this state links, not for the only one in the folder."""
    import subprocess

    from workbench.cuda import _cpu_build

    cxx = _cpu_build.find_cxx()
    mod = san["checked"]._cpu_module(True)
    profile = san["checked"]._cpu_module(False, profile=True)
    builds = ((mod, "checked", _cpu_build._sanitize_flags), (profile, "profile", _cpu_build._profile_flags))
    for m, kind, flags in builds:
        hooks = _cpu_build._hook_object(cxx, kind, flags(cxx))
        assert hooks.exists() and hooks.parent == Path(m.so_path).parent, hooks
        own = subprocess.run(["nm", m.so_path.removesuffix(".so") + ".o"], capture_output=True, text=True).stdout
        assert " U __tsan_read4" in own and " T __tsan_read4" not in own, "the module compiled the hooks itself"
        linked = subprocess.run(["nm", m.so_path], capture_output=True, text=True).stdout
        assert " t __tsan_read4" in linked, "the module lacks its own hidden copy of the hooks"
        monkeypatch.setattr(_cpu_build, "_run_compiler", lambda *a, **k: pytest.fail("the hooks were built again"))
        assert _cpu_build._hook_object(cxx, kind, flags(cxx)) == hooks
        monkeypatch.undo()
    plain = subprocess.run(["nm", san["plain"]._cpu_module(False).so_path], capture_output=True, text=True).stdout
    assert "__tsan_read4" not in plain
