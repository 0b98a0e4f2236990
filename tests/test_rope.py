"""rope: the two conventions, the fp32 angle bound behind the tolerance, each variant's coverage, the swapped bug."""

from __future__ import annotations

import math

import pytest
import torch

import workbench as wb
from kernels.rope.reference import ANGLE_ATOL, POS_MAX, X_MAX, explain, rotate
from kernels.rope.v1_triton import inv_freq
from tests._ops import variant_report, wrong_report
from tests.conftest import CPU_MODE, cuda_engine_ready


def test_registered_with_both_conventions_checked():
    assert [v.name for v in wb.variants("rope")] == ["torch_rotate_half", "triton", "cuda"]
    spec = wb.get_op("rope")
    assert spec.flags["interleaved"] == (False, True)
    assert {s["interleaved"] for s in spec.check_shapes} == {False, True}
    assert spec.bytes(B=1, S=2, H=3, D=4, dtype="float16") == 2 * 24 * 2 + 4 * 2


def test_reference_is_meta_complex_for_gptj_and_rotate_half_for_neox():
    x, pos = wb.make_inputs("rope", B=2, S=3, H=2, D=8, seed=0)
    ang = pos.double()[..., None, None] * 10000.0 ** (-torch.arange(4, dtype=torch.float64) * 2 / 8)
    xd = x.double()
    # GPT-J as Meta's Llama code writes it: pairs (2i, 2i+1) as complex numbers times e^(i angle)
    gptj = torch.view_as_real(torch.view_as_complex(xd.reshape(2, 3, 2, 4, 2)) * torch.polar(torch.ones_like(ang),
                                                                                              ang)).flatten(-2)
    torch.testing.assert_close(wb.reference("rope")(x, pos, interleaved=True), gptj)
    # NeoX as HF writes it: x * cos + rotate_half(x) * sin, the angles repeated over both halves
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    neox = xd * cos + torch.cat((-xd[..., 4:], xd[..., :4]), -1) * sin
    torch.testing.assert_close(wb.reference("rope")(x, pos), neox)


def test_the_conventions_are_one_rotation_on_permuted_features():
    x, pos = wb.make_inputs("rope", B=1, S=4, H=3, D=12, seed=1)
    d = 12
    to_gptj = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), -1).flatten()  # (0, 6, 1, 7, ...)
    neox = rotate(x, pos, 10000.0, False)
    gptj = rotate(x[..., to_gptj], pos, 10000.0, True)
    torch.testing.assert_close(gptj, neox[..., to_gptj])
    assert not torch.allclose(rotate(x, pos, 10000.0, True), neox)


@pytest.mark.parametrize("d,theta", [(64, 10000.0), (128, 500000.0)])
def test_fp32_angle_error_stays_inside_the_documented_bound(d, theta):
    """The tolerance assumes |fp32 angle - exact| <= 2 * 2^-24 * POS_MAX for every position make draws."""
    pos = torch.arange(POS_MAX, dtype=torch.float32)
    exact = pos.double()[:, None] * theta ** (-torch.arange(d // 2, dtype=torch.float64) * 2 / d)
    fp32 = pos[:, None] * inv_freq(d, theta, torch.device("cpu"))  # the Triton rung's angles
    assert (fp32.double() - exact).abs().max() <= 2 * 2.0**-24 * POS_MAX
    assert ANGLE_ATOL == pytest.approx(2 * 2.0**-24 * POS_MAX * X_MAX * math.sqrt(2))


def test_make_draws_arbitrary_positions_below_the_bound():
    x, pos = wb.make_inputs("rope", B=4, S=64, H=1, D=2, seed=0)
    assert pos.dtype == torch.int32 and 0 <= int(pos.min()) and int(pos.max()) < 512
    assert not torch.equal(pos, pos.sort(dim=1).values)  # not arange: decode batches hold arbitrary positions
    _, big = wb.make_inputs("rope", B=4, S=64, H=1, D=2, seed=0, case="large")
    assert POS_MAX - 512 <= int(big.min()) and int(big.max()) < POS_MAX
    assert float(x.abs().max()) <= X_MAX


@pytest.mark.parametrize("name", [v.name for v in wb.variants("rope")])
def test_variant_is_checked_under_both_conventions_and_large_positions(name):
    v = wb.variant("rope", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    rep = variant_report("rope", name)
    assert rep.ok, rep.summary()
    assert {c.shape["interleaved"] for c in rep.cases} == {False, True}
    assert {c.case for c in rep.cases} == {"random", "large"}
    dts = {c.dtype for c in rep.cases}
    assert {"float32", "float16"} <= dts
    if v.backend != "triton" or not CPU_MODE:
        assert "bfloat16" in dts


@pytest.mark.parametrize("name", ["triton", "cuda"])
def test_more_pairs_than_threads(name):
    """H * D/2 = 1024 pairs: the CUDA C block (256 threads) strides over them four times."""
    v = wb.variant("rope", name)
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    shapes = [{"B": 1, "S": 2, "H": 16, "D": 128, "interleaved": il} for il in (False, True)]
    rep = wb.check(v, shapes=shapes, dtypes=("float32",), seeds=(0,), cases=("large",), probes=False)
    assert rep.ok, rep.summary()


def test_swapped_convention_is_named():
    rep = wrong_report("rope", "wrong_convention_swapped")
    assert not rep.ok and rep.diagnosis == "rope_convention", rep.summary()
    assert {c.shape["interleaved"] for c in rep.failures} == {False, True}
    assert all(c.ok for c in rep.cases if c.shape["D"] == 2)  # one pair: the two conventions coincide


def test_explain_needs_the_other_convention_exactly():
    x, pos = wb.make_inputs("rope", B=1, S=3, H=2, D=8, seed=4)
    ref, other = rotate(x, pos, 10000.0, False), rotate(x, pos, 10000.0, True)
    assert explain([other], [ref], (x, pos), {"interleaved": False}, 1e-5, 1e-5) == "rope_convention"
    assert explain([ref], [other], (x, pos), {"interleaved": True}, 1e-5, 1e-5) == "rope_convention"
    backwards = rotate(x, -pos, 10000.0, False)  # rotated the wrong way: a different mistake
    assert explain([backwards], [ref], (x, pos), {"interleaved": False}, 1e-5, 1e-5) is None


@pytest.mark.parametrize("bad,match", [
    (lambda x, p: (x[..., :7].contiguous(), p), "D must be even"),
    (lambda x, p: (x, p.long()), "positions.*dtype"),
    (lambda x, p: (x, p[:, :2].contiguous()), r"positions must be \[B,S\]"),
    (lambda x, p: (x[0], p), "must be 4-D"),
])
def test_bad_input_raises_op_error(bad, match):
    x, pos = wb.make_inputs("rope", B=2, S=3, H=2, D=8, seed=0)
    with pytest.raises(wb.OpError, match=match):
        wb.reference("rope")(*bad(x, pos))
    with pytest.raises(wb.OpError, match="theta must be a positive number"):
        wb.reference("rope")(x, pos, theta=-1.0)
    with pytest.raises(wb.OpError, match="interleaved must be True or False"):
        wb.reference("rope")(x, pos, interleaved=1)
