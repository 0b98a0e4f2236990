"""rmsnorm: the contract, what each variant's check covers (it passes in tests/test_ops.py), long rows, bad input."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from tests._ops import variant_report
from tests.conftest import CPU_MODE, cuda_engine_ready

LONG = [{"M": 2, "N": 2**16}, {"M": 2, "N": 8200}]


def test_registered():
    assert "rmsnorm" in wb.ops()
    names = [v.name for v in wb.variants("rmsnorm")]
    assert names[0] == "torch_rms_norm" and {"triton_fused", "cuda_vec"} <= set(names)
    spec = wb.get_op("rmsnorm")
    assert spec.bytes(M=2, N=8, dtype="float16") == (2 * 2 * 8 + 8) * 2


def test_reference_matches_formula():
    x, w = wb.make_inputs("rmsnorm", M=3, N=10, seed=0)
    xd = x.double()
    want = xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double()
    torch.testing.assert_close(wb.reference("rmsnorm")(x, w), want)
    got = wb.reference("rmsnorm")(x, w, eps=0.5)
    assert not torch.allclose(got, want)


@pytest.mark.parametrize("name", [v.name for v in wb.variants("rmsnorm")])
def test_variant_is_checked_in_every_dtype_and_input_case(name):
    """tests/test_ops.py requires the report to pass (short rows, tests/_ops.py); here: what it covers."""
    v = wb.variant("rmsnorm", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    rep = variant_report("rmsnorm", name)
    dts = {c.dtype for c in rep.cases}
    assert {"float32", "float16"} <= dts
    assert {c.case for c in rep.cases} == {"random", "large", "nan"}
    if v.backend == "cuda" or not CPU_MODE:
        assert "bfloat16" in dts


@pytest.mark.parametrize("name", [v.name for v in wb.variants("rmsnorm")])
def test_long_rows(name):
    v = wb.variant("rmsnorm", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    long = wb.check(v, shapes=LONG, dtypes=("float32", "float16"), seeds=(0,), probes=False)  # test_ops probes
    assert long.ok, long.summary()
    assert {c.shape["N"] for c in long.cases} == {2**16, 8200}


def test_nan_rows_stay_nan_and_the_others_right():
    x, w = wb.make_inputs("rmsnorm", M=6, N=40, case="nan")
    ref = wb.reference("rmsnorm")(x, w)
    assert ref[:4].isnan().all() and ref[4:].isfinite().all()  # rows 0-3 hold a NaN: NaN everywhere, as torch

    def drops_nans(x, w, eps=1e-6):  # a kernel that skips NaNs in the sum of squares, as fmaxf skips them in a max
        xs = torch.where(x.isnan(), 0.0, x.float())
        return (xs * torch.rsqrt(xs.square().mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

    rep = wb.check(drops_nans, "rmsnorm", shapes=[{"M": 6, "N": 40}], seeds=(0,))
    assert not rep.ok and [c.case for c in rep.failures] == ["nan"], rep.summary()
    assert rep.diagnosis == "special_values"


def test_empty_inputs_give_empty_outputs():
    for shape in ({"M": 0, "N": 8}, {"M": 3, "N": 0}):
        x, w = wb.make_inputs("rmsnorm", **shape)
        for v in wb.variants("rmsnorm"):
            if v.backend == "cuda" and cuda_engine_ready():
                continue
            out = v(x, w)
            assert tuple(out.shape) == tuple(x.shape) and out.dtype == x.dtype, v.name


def test_eps_is_passed_through():
    x, w = wb.make_inputs("rmsnorm", M=2, N=64, seed=0)
    ref = wb.reference("rmsnorm")(x, w, eps=10.0)
    for v in wb.variants("rmsnorm"):
        if v.backend == "cuda" and cuda_engine_ready():
            continue
        torch.testing.assert_close(v(x, w, eps=10.0).double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", ["1d", "int", "meta", "noncontig", "w_len", "w_dtype", "eps"])
def test_bad_input_raises_op_error(bad):
    x, w = torch.randn(4, 8), torch.randn(8)
    args, kw = {"1d": ((x[0], w), {}), "int": ((x.to(torch.int32), w), {}),
                "meta": ((torch.empty(4, 8, device="meta"), w), {}), "noncontig": ((torch.randn(8, 4).t(), w), {}),
                "w_len": ((x, torch.randn(7)), {}), "w_dtype": ((x, w.half()), {}),
                "eps": ((x, w), {"eps": -1.0})}[bad]
    for name in ("torch_rms_norm", "triton_fused"):
        with pytest.raises(wb.OpError, match="rmsnorm"):
            wb.variant("rmsnorm", name)(*args, **kw)
