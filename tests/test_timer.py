"""The timer: check first, then time; in cpu mode records are labelled emulated and carry no throughput."""

from __future__ import annotations

import statistics

import pytest
import torch

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench import results, timer

FIELDS = ("op", "variant", "backend", "shape", "dtype", "time_ms", "p20_ms", "p80_ms", "flops", "bytes", "tflops",
          "gbps", "pct_peak", "bound", "emulated", "device", "versions", "date", "command")


@pytest.fixture(scope="module")
def gemm_record():
    return wb.bench(wb.variant("gemm", "torch_matmul"), M=32, N=48, K=16, reps=5, command="pytest gemm")


@requires_cpu_mode
def test_bench_record_in_cpu_mode(gemm_record):
    rec = gemm_record
    for f in FIELDS:
        assert f in rec, f"record lacks {f}"
    assert rec["op"] == "gemm" and rec["variant"] == "torch_matmul" and rec["backend"] == "torch"
    assert rec["shape"] == {"M": 32, "N": 48, "K": 16} and rec["dtype"] == "float32"
    assert rec["emulated"] is True
    assert rec["tflops"] is None and rec["gbps"] is None and rec["pct_peak"] is None and rec["bound"] is None
    assert rec["time_ms"] > 0
    assert 0 < rec["p20_ms"] <= rec["time_ms"] <= rec["p80_ms"]
    assert rec["flops"] == 2 * 32 * 48 * 16
    assert rec["bytes"] == (32 * 16 + 16 * 48 + 32 * 48) * 4
    assert rec["command"] == "pytest gemm"
    assert isinstance(rec["device"], dict) and rec["device"].get("name")
    assert isinstance(rec["versions"], dict) and rec["versions"].get("torch")
    assert isinstance(rec["date"], str) and rec["date"][:2] == "20"


def test_bench_record_is_a_valid_results_record(gemm_record):
    results.validate_record(gemm_record)


@requires_cpu_mode
def test_bench_emulated_triton_variant_with_dtype():
    rec = wb.bench(wb.variant("vecadd", "triton_block"), dtype="float16", N=3000, reps=3)
    assert rec["emulated"] is True and rec["backend"] == "triton" and rec["dtype"] == "float16"
    assert rec["bytes"] == 3 * 3000 * 2 and rec["flops"] == 3000
    assert rec["p20_ms"] <= rec["time_ms"] <= rec["p80_ms"]
    assert rec["tflops"] is None


def test_bench_plain_function_needs_op():
    def my_add(x, y):
        return x + y

    with pytest.raises(TypeError, match="name the op"):
        wb.bench(my_add, N=16)
    rec = wb.bench(my_add, "vecadd", N=64, reps=2)
    assert rec["variant"] == "my_add" and rec["backend"] == "user"


def test_bench_refuses_a_function_that_fails_the_checker():
    def add_wrong(x, y):
        return x - y

    with pytest.raises(AssertionError, match="fails the checker"):
        wb.bench(add_wrong, "vecadd", N=64)


# One known-wrong kernel per backend: tests/test_ops.py proves the checker fails every known-wrong kernel, and bench's
# refusal is the same code path for all of them (checking each again here cost minutes). vecadd/wrong_dropped_tail is
# right at the bench shape (whole blocks): bench must refuse it all the same.
REFUSED = [("vecadd", "wrong_off_by_one_mask"), ("vecadd", "wrong_dropped_tail"), ("vecadd", "wrong_no_bounds_check"),
           ("gemm", "wrong_fp16_accumulator")]


def _bench_shape(op):
    # a shape the kernel gets right (N=4096 is whole blocks): bench must still refuse it, because the checker fails
    return {"N": 4096} if op == "vecadd" else wb.get_op(op).check_shapes[1]


@pytest.mark.parametrize("op,name", REFUSED, ids=[f"{o}/{n}" for o, n in REFUSED])
def test_bench_refuses_known_wrong_kernels(op, name):
    v = wb.variant(op, name)
    with pytest.raises(AssertionError, match=f"{op}/{name} fails the checker"):
        wb.bench(v, dtype=v.dtypes[0], **_bench_shape(op))


def test_bench_refuses_what_cannot_run_here():
    v = wb.variant("vecadd", "triton_block")
    if wb.mode() != "cpu":
        pytest.skip("bf16 Triton runs on a GPU")
    with pytest.raises(RuntimeError, match="interpreter") as ei:
        wb.bench(v, dtype="bfloat16", N=64)
    assert "tl.dot" not in str(ei.value) and "arithmetic" in str(ei.value)  # vecadd has no dot
    assert "tl.dot" in wb.variant("gemm", "triton_tile").why_not_here("bfloat16")


def _cell(ns: dict, src: str) -> None:
    """Run ``src`` in ``ns``, as a notebook cell runs in the kernel's namespace."""
    exec(compile(src, "<cell>", "exec"), ns)  # noqa: S102


def _count_checks(monkeypatch) -> list:
    from workbench import checker

    calls = []
    real = checker.check
    monkeypatch.setattr(checker, "check", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    return calls


def test_bench_rechecks_a_function_redefined_under_the_same_name(monkeypatch):
    calls = _count_checks(monkeypatch)
    ns: dict = {}
    _cell(ns, "def my_add(x, y):\n    return x + y\n")
    wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    assert len(calls) == 1  # the same function, unchanged: checked once
    _cell(ns, "def my_add(x, y):\n    return x - y\n")  # the next cell redefines it wrong
    with pytest.raises(AssertionError, match="my_add fails the checker"):
        wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    assert len(calls) == 2


def test_bench_rechecks_when_a_helper_or_kernel_it_calls_changes(monkeypatch):
    calls = _count_checks(monkeypatch)
    ns: dict = {}
    _cell(ns, "def core(x, y):\n    return x + y\n\ndef my_add(x, y):\n    return core(x, y)\n")
    wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    _cell(ns, "def core(x, y):\n    return x * y\n")  # only the helper is redefined, wrong
    with pytest.raises(AssertionError, match="fails the checker"):
        wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    assert len(calls) == 2


ADD_CU = """extern "C" __global__ void add(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] OP y[i];
}
"""
RAW_CELL = """
import numpy as np
from workbench.interop import to_raw

def my_add(x, y):
    out = wb.empty_like(x)
    n = x.numel()
    k(((n + 127) // 128,), (128,), (to_raw(x), to_raw(y), to_raw(out), np.int32(n)))
    return out
"""


def test_bench_rechecks_a_function_whose_raw_kernel_source_changed(monkeypatch):
    from tests.conftest import cuda_engine_ready

    if why := cuda_engine_ready():
        pytest.skip(f"CUDA C engine not ready: {why}")
    calls = _count_checks(monkeypatch)
    ns: dict = {"wb": wb}
    _cell(ns, RAW_CELL)
    ns["k"] = wb.cuda.RawKernel(ADD_CU.replace("OP", "+"), "add")
    wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    ns["k"] = wb.cuda.RawKernel(ADD_CU.replace("OP", "-"), "add")  # the kernel's cell re-run with a bug
    with pytest.raises(AssertionError, match="fails the checker"):
        wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    ns["k"] = wb.cuda.RawKernel(ADD_CU.replace("OP", "+"), "add", options=("-DUNUSED=1",))  # options count too
    wb.bench(ns["my_add"], "vecadd", N=64, reps=1)
    assert len(calls) == 3


def test_fingerprint_follows_code_kernels_and_options():
    def f(x, y):
        return x + y

    def g(x, y):
        return x - y

    assert timer.fingerprint(f) == timer.fingerprint(f) != timer.fingerprint(g)
    v = wb.variant("vecadd", "triton_block")
    assert timer.fingerprint(v) == timer.fingerprint(v.fn)


def test_quantiles_on_known_lists():
    med, p20, p80 = timer._quantiles([5.0, 1.0, 4.0, 2.0, 3.0])
    assert med == 3.0
    assert p20 == pytest.approx(1.8) and p80 == pytest.approx(4.2)
    xs = [float(i) for i in range(1, 12)]  # 1..11, inclusive method: p20 = 3, p80 = 9
    assert timer._quantiles(xs) == (6.0, pytest.approx(3.0), pytest.approx(9.0))
    assert timer._quantiles([2.5]) == (2.5, 2.5, 2.5)
    assert timer._quantiles([1.0, 3.0]) == (2.0, pytest.approx(1.4), pytest.approx(2.6))
    med, p20, p80 = timer._quantiles([10.0, 1.0, 1.0, 1.0, 100.0, 1.0, 1.0])
    assert med == statistics.median([10.0, 1.0, 1.0, 1.0, 100.0, 1.0, 1.0]) == 1.0
    assert p20 <= med <= p80


def test_time_cpu_calls_warmup_then_reps():
    calls = []
    times = timer.time_cpu(lambda i: calls.append(i), n_sets=2, reps=4)
    assert len(times) == 4 and all(t >= 0 for t in times)
    assert calls == [0, 0, 1, 0, 1]


def test_percent_of_peak_of_an_op_without_flops_is_its_bandwidth_share(monkeypatch):
    # a transpose does 0 FLOPs: its roofline bound is the bandwidth, not min(peak, bw x 0) = 0 (a division by zero)
    import torch

    from workbench import hardware

    monkeypatch.setattr(hardware, "current_device", lambda index=0: object())  # a GPU with the peaks below
    monkeypatch.setattr(hardware, "peak_tflops", lambda dev, dt, **k: 60.0)
    monkeypatch.setattr(hardware, "peak_bandwidth", lambda dev, measured=False: 4800.0)
    got = timer._peak_fraction({"tflops": 0.0, "gbps": 2400.0}, torch.float32, 0.0, 2 * 4096 * 4096 * 4)
    assert got == {"bound": "memory", "pct_peak": 50.0}


def vecadd_lazy_off_the_check_shapes(x, y):
    """Right wherever the checker looks, and writes nothing at the one bench-sized N it is timed at."""
    return x + y if x.numel() != 8192 else wb.empty_like(x)


def vecadd_right_only_when_poisoned(x, y):
    from workbench.registry import _CHECKING

    return x + y if _CHECKING.get() else torch.zeros_like(x)


@pytest.mark.parametrize("fn,what", [(vecadd_lazy_off_the_check_shapes, "warm-up"),
                                     (vecadd_right_only_when_poisoned, "last timed call")])
def test_bench_checks_the_output_it_times(fn, what):
    with pytest.raises(AssertionError, match=rf"wrong at the bench shape \(the {what}[^)]*\)(.|\n)*N=8192") as ei:
        wb.bench(fn, "vecadd", N=8192, reps=1)
    assert "diagnosis:" in str(ei.value)
    assert wb.bench(lambda x, y: x + y, "vecadd", N=8192, reps=1)["time_ms"] > 0
