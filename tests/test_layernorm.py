"""layernorm: the contract's errors, the reference and stats() against torch, every variant through the checker,
the known-wrong kernels' diagnoses, and the fp32 precision study (one-pass against two-pass and Welford)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import workbench as wb
from kernels.layernorm import precision, stats
from kernels.layernorm import reference as R
from kernels.layernorm.v4_triton_fused import layernorm_fwd
from tests._ops import wrong_report

OP = "layernorm"


def _inputs(m: int = 5, n: int = 33, dtype: torch.dtype = torch.float32, case: str = "random") -> tuple:
    return wb.make_inputs(OP, M=m, N=n, dtype=dtype, seed=0, case=case)


# ------------------------------------------------------------------------------------------------- contract errors
BAD = [
    (lambda x, w, b: ((x[0], w, b), {}), r"layernorm: input x\[M,N\] must be 2-D"),
    (lambda x, w, b: ((x, w.half(), b), {}), r"layernorm: inputs must share one dtype"),
    (lambda x, w, b: ((x, w[:-1].contiguous(), b), {}), r"layernorm: w\[N\] must match x\[M,N\]'s N=33, got 32"),
    (lambda x, w, b: ((x, w, b[:-1].contiguous()), {}), r"layernorm: b\[N\] must match x\[M,N\]'s N=33, got 32"),
    (lambda x, w, b: ((x.t(), w, b), {}), r"layernorm: input x\[M,N\] must be contiguous"),
    (lambda x, w, b: ((x.int(), w, b), {}), r"layernorm: input x\[M,N\] must have dtype in"),
    (lambda x, w, b: ((x, w, b), {"eps": 0.0}), r"layernorm: eps must be a positive number, got 0.0"),
    (lambda x, w, b: ((x, w, b), {"eps": True}), r"layernorm: eps must be a positive number, got True"),
]


@pytest.mark.parametrize("change,msg", BAD, ids=range(len(BAD)))
def test_bad_inputs_raise_op_errors_naming_the_op(change, msg):
    args, kw = change(*_inputs())
    for fn in (wb.reference(OP), wb.variant(OP, "torch_layer_norm"), wb.variant(OP, "cuda_welford"), layernorm_fwd):
        with pytest.raises(wb.OpError, match=msg):
            fn(*args, **kw)


def test_stats_refuses_bad_input():
    with pytest.raises(wb.OpError, match=r"layernorm: input x\[M,N\] must be 2-D"):
        stats(torch.ones(3))
    with pytest.raises(wb.OpError, match="eps must be a positive number"):
        stats(torch.ones(2, 3), eps=-1.0)


# ------------------------------------------------------------------------------------------------- the reference
@pytest.mark.parametrize("eps", R.OP.flags["eps"])
@pytest.mark.parametrize("case", R.OP.cases)
def test_reference_is_layer_norm_in_float64(case, eps):
    x, w, b = _inputs(6, 37, case=case)
    want = F.layer_norm(x.double(), (37,), w.double(), b.double(), eps)
    torch.testing.assert_close(wb.reference(OP)(x, w, b, eps=eps), want, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_constant_rows_have_zero_variance_and_give_b():
    x, w, b = _inputs(4, 1025, case="constant")
    assert (x[0] == x[0, 0]).all() and (x[2] == x[2, 0]).all() and not (x[1] == x[1, 0]).all()
    mean, rstd = stats(x, eps=0.5)
    assert rstd[0] == pytest.approx(1 / math.sqrt(0.5)) and mean[0] == x[0, 0]
    assert torch.equal(wb.reference(OP)(x, w, b)[0], b.double())


def test_large_mean_rows_are_100_plus_unit_noise():
    x, _, _ = _inputs(8, 4097, case="large_mean")
    mean, rstd = stats(x)
    assert torch.allclose(mean, torch.full_like(mean, R.LARGE_MEAN), atol=0.1)
    assert torch.allclose(rstd, torch.ones_like(rstd), atol=0.05)


def test_stats_and_the_fused_forward_save_fp32_mean_and_rstd():
    for dtype in (torch.float32, torch.float16):
        x, w, b = _inputs(7, 1023, dtype=dtype, case="large_mean")
        mean, rstd = stats(x, eps=1e-5)
        xd = x.double()
        assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == rstd.shape == (7,)
        torch.testing.assert_close(mean.double(), xd.mean(1), rtol=1e-7, atol=0)
        torch.testing.assert_close(rstd.double(), 1 / torch.sqrt(xd.var(1, unbiased=False) + 1e-5), rtol=1e-6, atol=0)
        y, m2, r2 = layernorm_fwd(x, w, b, 1e-5, return_stats=True)
        assert y.dtype == dtype and m2.dtype == r2.dtype == torch.float32
        torch.testing.assert_close(m2, mean, rtol=2e-7, atol=0)
        torch.testing.assert_close(r2, rstd, rtol=1e-5, atol=0)


# ------------------------------------------------------------------------------------------------- the checker
@pytest.mark.parametrize("name", [v.name for v in wb.variants(OP)])
def test_every_variant_passes_the_checker(name):
    rep = wb.check(wb.variant(OP, name), quick=True, progress=False)
    assert rep.ok, rep.summary()
    assert {c.case for c in rep.cases} == set(R.OP.cases)
    assert {c.shape["N"] for c in rep.cases} == {1, 17, 1023, 1025, 4097}


def test_every_variant_is_deterministic_and_batch_invariant():
    # one warp, block or program per row, with a reduction order fixed by N alone: a row's bits do not depend on
    # the rows beside it or on the run
    for v in wb.variants(OP):
        rep = wb.check(v, deterministic=True, batch_invariant=True, progress=False)
        assert rep.ok and [c.probe for c in rep.cases] == ["deterministic", "batch"], rep.summary()


def test_the_ladder_has_every_rung_of_the_issue():
    backends = {v.name: v.backend for v in wb.variants(OP)}
    assert backends == {"torch_layer_norm": "torch", "cupy_two_pass": "cupy", "cuda_warp": "cuda",
                        "cuda_welford": "cuda", "cuda_block": "cuda", "triton_fused": "triton"}
    assert {v.name: v.expected_diagnosis for v in wb.known_wrong(OP)} == {
        "wrong_eps_outside_sqrt": "computed_nan", "wrong_unbiased_variance": "scale"}


def test_eps_outside_the_sqrt_is_caught_on_the_constant_rows():
    rep = wrong_report(OP, "wrong_eps_outside_sqrt")
    assert not rep.ok and rep.diagnosis == "computed_nan", rep.summary()
    assert rep.telling_failure.case == "constant"
    # past N = 1 (one element: the variance is 0 in every case) only the rows of equal values show it
    assert {c.case for c in rep.failures if c.shape["N"] > 1} == {"constant"}


def test_eps_outside_the_sqrt_is_caught_by_the_large_eps_too():
    v = wb.variant(OP, "wrong_eps_outside_sqrt")
    rep = wb.check(v, shapes=[{"M": 4, "N": 1023, "eps": 0.5}], dtypes=["float32"], seeds=(0,), cases=["random"],
                   probes=False, progress=False)
    assert not rep.ok and rep.failures[0].max_abs_err > 0.1, rep.summary()
    small = wb.check(v, shapes=[{"M": 4, "N": 1023}], dtypes=["float32"], seeds=(0,), cases=["random"],
                     probes=False, progress=False)
    assert small.ok, "at eps = 1e-5 the error is about eps: only the constant rows or a large eps show it"


def test_unbiased_variance_is_named_a_scale_of_the_normalised_part():
    rep = wrong_report(OP, "wrong_unbiased_variance")
    assert not rep.ok and rep.diagnosis == "scale", rep.summary()
    assert rep.telling_failure.shape["N"] == 4097
    x, w, b = _inputs(3, 17)
    ref = wb.reference(OP)(x, w, b)
    c = math.sqrt(16 / 17)
    assert R.explain([(ref - b.double()) * c + b.double()], [ref], (x, w, b), {}, 5e-5, 5e-5) == "scale"
    assert R.explain([ref + 0.01], [ref], (x, w, b), {}, 5e-5, 5e-5) is None  # a shift is no scale


# ------------------------------------------------------------------------------------------------- precision
def test_the_emulated_methods_agree_on_exact_small_integers():
    x = np.arange(2 * 70, dtype=np.float32).reshape(2, 70) % 7  # exact sums in fp32
    want = x.astype(np.float64).var(axis=1)
    for fn in (precision.one_pass, precision.two_pass, precision.welford):
        np.testing.assert_allclose(fn(x), want, rtol=1e-6)


def test_one_pass_error_grows_with_the_mean_while_two_pass_and_welford_stay_small():
    means = (1.0, 10.0, 100.0, 1e3, 1e4)
    r = precision.variance_error(means, n=1024, rows=16)
    assert r["means"] == list(means) and r["n"] == 1024 and set(r["var_error"]) == set(precision.METHODS)
    one, two, wel = (r["var_error"][k] for k in ("one_pass", "two_pass", "welford"))
    assert all(b > a for a, b in zip(one, one[1:], strict=False)), one  # grows at every step
    assert one[-1] > 1.0 > 1e3 * one[0]  # at mean 1e4 the error exceeds the variance (1) itself
    assert max(two) < 1e-5 and max(wel) < 1e-3, (two, wel)
    assert all(o > 10 * w for o, w in zip(one[2:], wel[2:], strict=True))
    assert r["rstd_error"]["one_pass"][-1] > 0.1 and max(r["rstd_error"]["two_pass"]) < 1e-5
