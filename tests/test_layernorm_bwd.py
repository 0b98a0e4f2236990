"""layernorm_bwd: the contract's errors, the float64 reference against autograd, each variant through the checker
(the shared reports of tests/_ops.py), the known-wrong column sum's diagnosis, and the determinism each variant
declares: the two-stage reduction gives the same bits on every call."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from kernels.layernorm_bwd import reference as R
from kernels.layernorm_bwd.triton_rows import ROWS_PER_CTA
from tests._ops import variant_reports, wrong_report

OP = "layernorm_bwd"


def _inputs(dtype: torch.dtype = torch.float32, seed: int = 0, case: str = "random", **shape: int) -> tuple:
    return wb.make_inputs(OP, dtype=dtype, seed=seed, case=case, **{"M": 5, "N": 7, **shape})


# ------------------------------------------------------------------------------------------------- contract errors
BAD = [
    (lambda dy, x, w, m, r: (dy, x, w, m.half(), r), r"layernorm_bwd: input mean\[M\] must have dtype in"),
    (lambda dy, x, w, m, r: (dy, x, w, m, r.double()), r"layernorm_bwd: input rstd\[M\] must have dtype"),
    (lambda dy, x, w, m, r: (dy, x, w.half(), m, r), r"layernorm_bwd: inputs must share one dtype"),
    (lambda dy, x, w, m, r: (dy[:, :3].contiguous(), x, w, m, r), r"layernorm_bwd: dy must have x's shape \(5, 7\)"),
    (lambda dy, x, w, m, r: (dy, x, w[:3].contiguous(), m, r), r"layernorm_bwd: w\[N\] must match x\[M,N\]'s N=7"),
    (lambda dy, x, w, m, r: (dy, x, w, m[:4].contiguous(), r), r"layernorm_bwd: mean\[M\] must match x\[M,N\]'s M=5"),
    (lambda dy, x, w, m, r: (dy, x, w, m, r[:1].contiguous()), r"layernorm_bwd: rstd\[M\] must match x\[M,N\]'s M=5"),
    (lambda dy, x, w, m, r: (dy, x[0], w, m, r), r"layernorm_bwd: input x\[M,N\] must be 2-D"),
    (lambda dy, x, w, m, r: (dy, x.t(), w, m, r), r"layernorm_bwd: input x\[M,N\] must be contiguous"),
]


@pytest.mark.parametrize("change,msg", BAD, ids=range(len(BAD)))
def test_bad_inputs_raise_op_errors_naming_the_op(change, msg):
    args = change(*_inputs())
    for fn in (wb.reference(OP), wb.variant(OP, "torch_native_bwd"), wb.variant(OP, "triton_two_stage")):
        with pytest.raises(wb.OpError, match=msg):
            fn(*args)


# ------------------------------------------------------------------------------------------------- the reference
@pytest.mark.parametrize("case", ["random", "large"])
def test_reference_is_autograd_of_the_float64_forward(case):
    """The closed form for dx (two row means) and the column sums equal autograd through y = xhat * w + b."""
    dy, x, w, _, _ = _inputs(case=case, M=6, N=33)
    x64 = x.double().requires_grad_()
    w64, b64 = w.double().requires_grad_(), torch.zeros(33, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.layer_norm(x64, (33,), w64, b64, R.EPS)
    want = torch.autograd.grad(y, (x64, w64, b64), dy.double())
    mean, rstd = R.stats(x)  # fp32, as make() saves them; autograd differentiates the exact statistics
    got = R.reference(dy, x, w, mean, rstd)
    for g, e in zip(got, want, strict=True):  # the saved fp32 mean and rstd cost ~1e-7 relative
        torch.testing.assert_close(g, e, atol=2e-5, rtol=1e-5)


def test_saved_statistics_are_float32_rows_of_x():
    _, x, _, mean, rstd = _inputs(case="large", M=4, N=64)
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == rstd.shape == (4,)
    assert float(mean.min()) > R.LARGE_MEAN  # the large case: every row's mean past 100
    var = x.double().var(dim=1, unbiased=False)
    torch.testing.assert_close(rstd.double(), torch.rsqrt(var + R.EPS), rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------------------------- the checker
TRITON = ["triton_atomic", "triton_group_lock", "triton_two_stage"]


@pytest.mark.parametrize("name", TRITON)
def test_triton_variants_cover_ragged_rows_partial_ctas_and_the_large_case(name):
    reports = variant_reports(OP, name)
    assert all(rep.ok for rep in reports), [rep.summary() for rep in reports]
    ran = [c for rep in reports for c in rep.cases]
    ns = {c.shape["N"] for c in ran}
    assert {1, 17, 1023, 1025, 4097} <= ns, ns
    assert {c.shape["M"] % ROWS_PER_CTA for c in ran if c.shape["M"] > ROWS_PER_CTA} >= {1, 6}  # partial last CTA
    assert {c.case for c in ran} == {"random", "large"}
    assert {c.dtype for c in ran} == {"float32", "float16"}  # bf16: refused by the interpreter, saying so


def test_cuda_two_stage_covers_every_dtype_and_partial_ctas():
    reports = variant_reports(OP, "cuda_two_stage")
    assert all(rep.ok for rep in reports), [rep.summary() for rep in reports]
    ran = [c for rep in reports for c in rep.cases]
    assert {c.dtype for c in ran} == {"float32", "float16", "bfloat16"}
    assert {c.shape["M"] % ROWS_PER_CTA for c in ran if c.shape["M"] > ROWS_PER_CTA} >= {1, 6}


def test_wrong_column_sum_is_scattered_in_dw_and_db_only():
    rep = wrong_report(OP, "wrong_sum_over_n")
    assert not rep.ok and rep.diagnosis == "scattered", rep.summary()
    failed = [c for c in rep.cases if not c.ok]
    assert failed and all(set(c.wrong_outputs) == {"dw", "db"} for c in failed), [c.wrong_outputs for c in failed]
    # M = 1, N = 1: one partial row and one column, where summing either axis gives the same number.
    assert all(c.ok for c in rep.cases if c.shape == {"M": 1, "N": 1})


# ------------------------------------------------------------------------------------------------- determinism
def test_each_variant_declares_whether_it_is_deterministic():
    declared = {v.name: v.deterministic for v in wb.variants(OP, include_wrong=True)}
    assert declared["triton_atomic"] is False and declared["triton_group_lock"] is False
    assert declared["triton_two_stage"] is True and declared["cuda_two_stage"] is True


@pytest.mark.parametrize("name", ["triton_two_stage", "cuda_two_stage"])
def test_two_stage_gives_the_same_bits_on_every_call(name):
    v = wb.variant(OP, name)
    inputs = _inputs(M=70, N=40, seed=3)
    first = v(*inputs)
    for _ in range(2):
        again = v(*inputs)
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_group_lock_puts_several_rows_in_each_group_under_the_interpreter():
    """Each group's lock is taken by several programs (so the lock and the first-arrival count are exercised)."""
    from kernels.layernorm_bwd.v2_triton_group_lock import group_size

    if wb.mode() != "cpu":
        pytest.skip("the interpreter's group size")
    assert 70 // group_size(40) >= 2
    dx, dw, db = wb.variant(OP, "triton_group_lock")(*_inputs(M=70, N=40))
    _, rdw, rdb = wb.reference(OP)(*_inputs(M=70, N=40))
    torch.testing.assert_close(dw.double(), rdw, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(db.double(), rdb, atol=2e-4, rtol=1e-4)
