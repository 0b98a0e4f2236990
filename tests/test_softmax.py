"""softmax: what each variant's check covers (fp32, fp16, bf16 where it runs; it passes in tests/test_ops.py), long
rows, exercises and bad input."""

from __future__ import annotations

import functools

import pytest
import torch

import workbench as wb
from tests._ops import variant_report
from tests.conftest import CPU_MODE, cuda_engine_ready

LONG = [{"M": 2, "N": 2**17}, {"M": 3, "N": 8195}]  # for the long-row variants
LONG_ROW_VARIANTS = ("cuda_block", "cuda_vec", "cuda_rows", "triton_online", "triton_autotuned")


def _names() -> list[str]:
    return [v.name for v in wb.variants("softmax")]


def _skip_cuda(v: wb.Variant) -> None:
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())


@functools.cache
def _long_report(name: str) -> wb.CheckReport:
    v = wb.variant("softmax", name)
    # probes=False: tests/test_ops.py probes every variant already; this test is about the two long rows
    return wb.check(v, shapes=LONG, dtypes=("float32", "float16"), seeds=(0,), cases=("random", "edge"), probes=False)


def test_variants_registered_in_teaching_order():
    names = _names()
    assert names[0] == "torch_softmax"
    for a, b in [("numba_three_pass", "numba_block_tree"), ("cuda_naive", "cuda_online"), ("cuda_online", "cuda_warp"),
                 ("cuda_warp", "cuda_block"), ("cuda_block", "cuda_vec"), ("cuda_vec", "cuda_rows"),
                 ("triton_fused", "triton_online"), ("triton_online", "triton_autotuned")]:
        assert names.index(a) < names.index(b)
    for v in wb.variants("softmax"):
        if v.backend in ("cuda", "triton"):
            assert v.inspect_spec is not None, v.name
            assert v.inspect_spec()["kind"] == v.backend
        if v.backend == "cuda":
            assert v.cu_file is not None and v.cu_file.exists()


@pytest.mark.parametrize("name", _names())
def test_variant_is_checked_in_every_dtype_and_input_case(name):
    """tests/test_ops.py requires the report to pass (short rows, tests/_ops.py); here: what it covers."""
    v = wb.variant("softmax", name)
    _skip_cuda(v)
    rep = variant_report("softmax", name)
    dts = {c.dtype for c in rep.cases}
    assert {"float32", "float16"} <= dts, f"{name} was not checked in fp32 and fp16: {dts}"
    assert {c.case for c in rep.cases} == {"random", "edge", "nan"}
    if v.backend == "cuda" or not CPU_MODE:
        assert "bfloat16" in dts


def _drop_nans(x):
    return torch.softmax(torch.where(x.isnan(), float("-inf"), x), dim=-1)  # as fmaxf(-inf, NaN) = -inf drops it


def test_nan_inputs_must_make_their_rows_nan():
    rep = wb.check(_drop_nans, "softmax", shapes=[{"M": 5, "N": 40}], seeds=(0,))
    assert not rep.ok and [c.case for c in rep.failures] == ["nan"]
    (c,) = rep.failures
    assert c.n_mismatch == 3 * 40  # rows 0-2 hold a NaN among finite values; row 3 (NaN among -inf) and 4 are right
    assert rep.diagnosis == "special_values", rep.summary()


@pytest.mark.parametrize("name", LONG_ROW_VARIANTS)
def test_long_rows(name):
    v = wb.variant("softmax", name)
    _skip_cuda(v)
    rep = _long_report(name)
    assert rep.ok, rep.summary()
    assert any(c.shape["N"] == 2**17 for c in rep.cases)


@pytest.mark.skipif(not CPU_MODE, reason="cpu-mode limits")
def test_cpu_mode_refusals_say_why():
    why = wb.variant("softmax", "numba_block_tree").why_not_here("float32", {"M": 2, "N": 2**17})
    assert why and "simulator" in why
    why = wb.variant("softmax", "triton_fused").why_not_here("float32", {"M": 2, "N": 2**17})
    assert why and "triton_online" in why


def test_known_wrong_kernels_are_registered():
    """They are checked, with every op's, in tests/test_ops.py."""
    wrong = wb.known_wrong("softmax")
    assert {"wrong_unwritten_rows", "wrong_zero_empty_rows", "wrong_no_max", "wrong_unguarded_warp_slots"} <= {
        v.name for v in wrong}


@pytest.mark.parametrize("bad", ["1d", "3d", "int", "float64", "meta", "noncontig"])
def test_bad_input_raises_op_error(bad):
    x = torch.randn(4, 8)
    arg = {"1d": x[0], "3d": x[None], "int": x.to(torch.int32), "float64": x.double(),
           "meta": torch.empty(4, 8, device="meta"), "noncontig": x.t()}[bad]
    for name in ("torch_softmax", "triton_fused"):
        with pytest.raises(wb.OpError, match="softmax"):
            wb.variant("softmax", name)(arg)
    with pytest.raises(wb.OpError, match="softmax"):
        wb.reference("softmax")(arg)


EXERCISES = ["softmax-warp-shuffle", "softmax-online", "softmax-triton-row"]


@pytest.mark.parametrize("ex_id", EXERCISES)
def test_exercise_solution_passes_and_starter_fails(ex_id, capsys):
    from workbench.practice.learner_code import load_entry

    ex = wb.exercise(ex_id)
    if "cuda" in ex_id or "shuffle" in ex_id:
        if cuda_engine_ready():
            pytest.skip(cuda_engine_ready())
    assert len(ex.hints) >= 2
    good = ex.check(load_entry(ex.solution_file, ex.entry))
    assert good.ok, good.summary()
    bad = ex.check(load_entry(ex.starter_file, ex.entry))
    assert not bad.ok
    out = capsys.readouterr().out
    assert "Correct" in out and ("Not yet" in out or "Almost" in out)
