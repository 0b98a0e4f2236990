"""The CuPy rung: registered first in each ladder, checked like every variant, and the softmax byte count."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch

import workbench as wb
from tests._ops import variant_report
from tests.conftest import CPU_MODE, requires_cpu_mode
from workbench.practice.starters import solution_text

RUNG = {
    "vecadd": ["cupy_array", "cupy_elementwise"],
    "softmax": ["cupy_unfused", "cupy_reduction", "cupy_fuse"],
    "rmsnorm": ["cupy_array", "cupy_reduction"],
    "attention": ["cupy_materialized"],
    "gemm": ["cupy_matmul"],
    "moe": ["cupy_loop"],
}
CASES = [(op, name) for op, names in RUNG.items() for name in names]


@pytest.mark.parametrize("op", RUNG)
def test_the_cupy_rung_is_the_first_step_of_the_ladder(op):
    vs = wb.variants(op)
    assert vs[0].backend == "torch"  # the vendor baseline, registered with the contract
    assert [v.name for v in vs[1:1 + len(RUNG[op])]] == RUNG[op]
    assert [v.name for v in vs if v.backend == "cupy"] == RUNG[op]
    for v in vs[1:1 + len(RUNG[op])]:
        assert v.source.name == "v0_cupy.py" and not v.gpu_only
        assert v.runs_here("float32") and v.runs_here("float16")


@pytest.mark.parametrize("op,name", CASES)
def test_cupy_variant_is_checked_in_both_dtypes_and_every_case(op, name):
    """tests/test_ops.py requires the report to pass (fp32 and fp16: numpy has no bfloat16); here: what it covers."""
    rep = variant_report(op, name)
    assert {c.dtype for c in rep.cases} == {"float32", "float16"}
    assert {c.case for c in rep.cases} == set(wb.get_op(op).cases)


@requires_cpu_mode
@pytest.mark.parametrize("op,name", CASES)
def test_bfloat16_is_refused_in_cpu_mode(op, name):
    spec = wb.get_op(op)
    sizes, kw = spec.split(spec.check_shapes[1])
    inputs = wb.make_inputs(op, dtype="bfloat16", **sizes)
    with pytest.raises(wb.UnsupportedHere, match="numpy has no bfloat16"):
        wb.variant(op, name)(*inputs, **kw)


def _measured_unfused_bytes(x: np.ndarray) -> list[tuple[str, int, int]]:
    """Run the five array calls of cupy_unfused on numpy and add up the bytes each call's arrays hold."""
    a = x.astype(np.float32)
    m = a.max(axis=1, keepdims=True)
    z = a - m
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    y = e / s
    return [("max", a.nbytes, m.nbytes), ("subtract", a.nbytes + m.nbytes, z.nbytes), ("exp", z.nbytes, e.nbytes),
            ("sum", e.nbytes, s.nbytes), ("divide", e.nbytes + s.nbytes, y.nbytes)]


@pytest.mark.parametrize("M,N", [(4, 1024), (4096, 4096), (1, 1)])
def test_softmax_traffic_of_the_unfused_array_code(M, N):  # noqa: N803
    from kernels.softmax.v0_cupy import traffic

    t = traffic(M, N, "float32")
    assert t["cupy_unfused"] == _measured_unfused_bytes(np.zeros((M, N), np.float32))
    total = {k: sum(r + w for _, r, w in v) for k, v in t.items()}
    assert total["fused"] == 2 * M * N * 4 == wb.get_op("softmax").bytes(M=M, N=N, dtype="float32")
    assert total["cupy_unfused"] == (8 * M * N + 4 * M) * 4  # 5 reads and 3 writes of [M,N], 4 [M] vectors
    assert total["cupy_reduction"] == 4 * M * N * 4 + 5 * M * 4  # x read 3 times, y written once
    assert len(t["cupy_unfused"]) == 5 and len(t["cupy_reduction"]) == 3 and len(t["cupy_fuse"]) == 3
    h = traffic(M, N, "float16")
    assert [k for k, _, _ in h["cupy_unfused"]] == ["astype(float32)", "max", "subtract", "exp", "sum", "divide",
                                                    "astype(input dtype)"]
    assert sum(r + w for _, r, w in h["fused"]) == 2 * M * N * 2


@requires_cpu_mode
def test_generated_kernels_of_the_softmax_rung():
    from kernels.softmax import v0_cupy

    (x,) = wb.make_inputs("softmax", M=3, N=40, dtype="float16")
    wb.variant("softmax", "cupy_reduction")(x)
    code = v0_cupy._row_sum_exp.cached_codes[(np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float32))]
    assert "typedef float16 T;" in code and "static_cast<_type_reduce>(expf((float)x - m));" in code
    norm = v0_cupy._normalise.cached_code
    assert "y = (T)(expf((float)x - m) / s);" in norm and "CUPY_FOR(i, _ind.size())" in norm


# ---------------------------------------------------------------------------------------- the rmsnorm exercise


def _run_variant_of_solution(old: str, new: str) -> tuple[wb.CheckReport, str]:
    ex = wb.exercise("rmsnorm-reduction-kernel")
    src = solution_text(ex.solution_file)  # as a learner reads it: no learner-region markers
    assert old in src
    ns: dict = {}
    exec(compile(src.replace(old, new), "learner", "exec"), ns)  # noqa: S102
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rep = ex.check(ns["rmsnorm"])
    return rep, buf.getvalue()


def test_exercise_rejects_a_sum_without_the_square():
    rep, out = _run_variant_of_solution('"(float)x * (float)x"', '"x"')
    assert not rep and rep.diagnosis == "computed_nan", out  # a negative sum: rsqrt gives NaN


def test_exercise_rejects_a_wrong_identity():
    rep, out = _run_variant_of_solution('    "0",  # identity', '    "1",  # identity')
    # every one of a block's 512 threads starts from the identity, so 1 adds hundreds to each row's sum
    assert not rep and out.startswith(("Not yet", "Almost")), out


def test_exercise_rejects_a_float16_accumulator():
    rep, out = _run_variant_of_solution('"rmsnorm_sum_squares")', '"rmsnorm_sum_squares", reduce_type="T")')
    bad = {(c.dtype, c.case) for c in rep.failures}
    assert bad == {("float16", "large")}, out  # 1030 squares of ~300 overflow fp16's 65504


@pytest.mark.skipif(not CPU_MODE, reason="the CPU stand-in's compile message")
def test_exercise_reports_a_syntax_error_in_the_learners_string():
    rep, out = _run_variant_of_solution('"a + b"', '"a +* b"')
    assert rep.diagnosis == "error"
    assert "line 1 of your reduce_expr: `a +* b`" in out and "of the generated kernel" in out


def test_solution_matches_the_registered_variant():
    from workbench.practice.learner_code import load_entry

    ex = wb.exercise("rmsnorm-reduction-kernel")
    fn = load_entry(ex.solution_file, "rmsnorm")
    x, w = wb.make_inputs("rmsnorm", M=3, N=50, seed=2)
    torch.testing.assert_close(fn(x, w), wb.variant("rmsnorm", "cupy_reduction")(x, w))
