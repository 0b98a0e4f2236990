"""add_rmsnorm: the contract, the fusion byte count, what each variant's check covers, the eps bug, bad input."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from kernels.add_rmsnorm import fusion_bytes
from kernels.add_rmsnorm.reference import explain
from tests._ops import variant_report, wrong_report
from tests.conftest import CPU_MODE, cuda_engine_ready
from workbench.practice.answers import fusion_bytes_saved


def test_registered_with_its_ladder_and_tuple_outputs():
    names = [v.name for v in wb.variants("add_rmsnorm")]
    assert names == ["torch_add_rms_norm", "triton_fused", "cuda_fused"]
    spec = wb.get_op("add_rmsnorm")
    assert spec.outputs == ("y", "new_residual")
    assert [v.name for v in wb.known_wrong("add_rmsnorm")] == ["wrong_eps_outside_sqrt"]
    assert {s["N"] for s in spec.check_shapes} >= {1, 17, 1023, 1025, 4097}


def test_reference_rounds_the_sum_then_normalises_it():
    x, r, w = wb.make_inputs("add_rmsnorm", M=3, N=10, dtype="float16", seed=0)
    y, s = wb.reference("add_rmsnorm")(x, r, w)
    assert torch.equal(s, (x + r).double())  # the sum as torch rounds it in fp16, exactly
    want = s / torch.sqrt((s * s).mean(-1, keepdim=True) + 1e-6) * w.double()
    torch.testing.assert_close(y, want)
    assert not torch.allclose(wb.reference("add_rmsnorm")(x, r, w, eps=0.5)[0], want)


def test_fusion_bytes_counts_two_kernels_against_one():
    m, n = 8192, 4096
    b = fusion_bytes(m, n, "bfloat16")
    assert b["two_kernels"] == (3 * m * n + 2 * m * n + n) * 2  # add: x, r, s; rmsnorm: s, w, y
    assert b["fused"] == (4 * m * n + n) * 2 == wb.get_op("add_rmsnorm").bytes(M=m, N=n, dtype="bfloat16")
    assert b["saved"] == m * n * 2 == 67_108_864  # the re-read of s: 64 MiB
    assert fusion_bytes(m, n, torch.float32)["saved"] == 2 * b["saved"]
    assert fusion_bytes_saved(m, n, "bfloat16").value == pytest.approx(67.108864)  # the napkin drill's answer


@pytest.mark.parametrize("name", [v.name for v in wb.variants("add_rmsnorm")])
def test_variant_is_checked_in_every_dtype_and_input_case(name):
    """tests/test_ops.py requires the report to pass; here: what it covers."""
    v = wb.variant("add_rmsnorm", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    rep = variant_report("add_rmsnorm", name)
    assert rep.ok, rep.summary()
    dts = {c.dtype for c in rep.cases}
    assert {"float32", "float16"} <= dts
    assert {c.case for c in rep.cases} == {"random", "large", "nan"}
    if v.backend != "triton" or not CPU_MODE:  # the interpreter refuses bf16 arithmetic
        assert "bfloat16" in dts


@pytest.mark.parametrize("name", ["triton_fused", "cuda_fused"])
def test_rows_longer_than_the_registers_hold(name):
    """N = 8200 > 8 x 1024: cuda_fused's threads re-read the tail of s they stored (the path check shapes miss)."""
    v = wb.variant("add_rmsnorm", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    rep = wb.check(v, shapes=[{"M": 2, "N": 8200}], dtypes=("float32", "float16"), seeds=(0,), probes=False)
    assert rep.ok, rep.summary()


def test_eps_outside_the_sqrt_fails_only_where_eps_matters_and_is_named():
    rep = wrong_report("add_rmsnorm", "wrong_eps_outside_sqrt")
    assert not rep.ok and rep.diagnosis == "normalizer", rep.summary()
    assert all(c.ok for c in rep.cases), rep.summary()  # the plan: eps = 1e-6 and rows of RMS about 1.4
    assert any(c.probe == "flag" and c.shape["eps"] == 0.5 for c in rep.failures), rep.summary()


def test_eps_outside_the_sqrt_shows_at_the_default_eps_on_rows_of_small_rms():
    """sqrt(rms^2 + eps) / (rms + eps) - 1 ~ eps / (2 rms^2): 5e-7 at rms 1, past fp32's ~2e-5 once the rms is below
    ~0.15 (a drawn probe of one-element rows finds such a row now and then)."""
    v = wb.variant("add_rmsnorm", "wrong_eps_outside_sqrt")
    x, r, w = wb.make_inputs("add_rmsnorm", M=4, N=64, dtype="float32", seed=0)
    for scale, lo, hi in ((1.0, 1e-7, 1e-6), (1e-2, 1e-3, 1e-2)):
        y, s = v(x * scale, r * scale, w)
        want, _ = wb.reference("add_rmsnorm")(x * scale, r * scale, w)
        rel = ((y.double() - want) / want).abs().amax(-1)
        rms = s.double().square().mean(-1).sqrt()
        predicted = (rms * rms + 1e-6).sqrt() / (rms + 1e-6) - 1
        torch.testing.assert_close(rel, predicted.abs(), rtol=0.05, atol=2e-7)
        assert lo <= rel.max().item() <= hi, (scale, rel)


def test_explain_names_a_factor_per_row_only_when_the_sum_is_right():
    x, r, w = wb.make_inputs("add_rmsnorm", M=4, N=33, seed=2)
    y, s = wb.reference("add_rmsnorm")(x, r, w)
    factor = torch.tensor([[1.2], [0.9], [1.0], [1.5]], dtype=torch.float64)
    assert explain([y * factor, s], [y, s], (x, r, w), {}, 1e-5, 1e-5) == "normalizer"
    assert explain([y * factor, s + 1], [y, s], (x, r, w), {}, 1e-5, 1e-5) is None  # the sum is wrong too
    y_of_x, _ = wb.reference("add_rmsnorm")(x, torch.zeros_like(r), w)  # normalising x, not x + r
    assert explain([y_of_x, s], [y, s], (x, r, w), {}, 1e-5, 1e-5) is None


@pytest.mark.parametrize("bad,match", [
    (lambda x, r, w: (x, r[:, :-1].contiguous(), w), "residual must have x's shape"),
    (lambda x, r, w: (x, r.half(), w), "share one dtype"),
    (lambda x, r, w: (x, r, w[:-1].contiguous()), r"w\[N\] must match"),
    (lambda x, r, w: (x[0], r, w), "must be 2-D"),
    (lambda x, r, w: (x.t(), r.t(), w), "contiguous"),
])
def test_bad_input_raises_op_error(bad, match):
    x, r, w = wb.make_inputs("add_rmsnorm", M=4, N=4, seed=0)
    with pytest.raises(wb.OpError, match=match):
        wb.reference("add_rmsnorm")(*bad(x, r, w))
    with pytest.raises(wb.OpError, match="eps must be a positive number"):
        wb.reference("add_rmsnorm")(x, r, w, eps=0.0)
