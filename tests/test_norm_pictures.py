"""Notebook 07's pictures: the fp32 variance error by row mean, and MXFP4's block scales beside the values."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("plotly.graph_objects", reason="plotly is not installed (notebook wheels not carried)")

import torch  # noqa: E402

from kernels.gemm_mxfp4 import reference as mxref  # noqa: E402
from kernels.layernorm import precision  # noqa: E402
from workbench import norm_pictures as npic  # noqa: E402

STUDY = {"means": [1.0, 10.0, 100.0], "n": 8, "rows": 2, "eps": 1e-5,
         "var_error": {"one_pass": [1e-7, 1e-5, 3e-3], "two_pass": [1e-7, 0.0, 1e-7], "welford": [1e-7, 2e-7, 2e-6]},
         "rstd_error": {"one_pass": [1e-7, 1e-5, math.inf], "two_pass": [1e-7, 1e-7, 1e-7],
                        "welford": [1e-7, 2e-7, 2e-6]}}


def test_one_line_per_method_on_log_axes_with_the_variance_as_reference():
    fig = npic.precision_figure(STUDY)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == [npic.METHOD_LABELS[k] for k in ("one_pass", "two_pass", "welford")]
    assert list(lines[0].y) == [1e-7, 1e-5, 3e-3] and list(lines[0].x) == [1.0, 10.0, 100.0]
    floor = 10 ** fig.layout.yaxis.range[0]
    assert lines[1].y[1] == pytest.approx(floor)  # an exact 0 sits on the floor of the log axis
    assert (fig.layout.xaxis.type, fig.layout.yaxis.type) == ("log", "log")
    (ref,) = [t for t in fig.data if t.mode == "lines"]
    assert list(ref.y) == [1.0, 1.0] and "variance itself" in ref.name


def test_a_nan_rstd_is_a_cross_at_the_top_not_a_missing_point():
    fig = npic.precision_figure(STUDY, which="rstd_error")
    one = next(t for t in fig.data if t.name == npic.METHOD_LABELS["one_pass"])
    assert one.y[2] is None  # no finite value to draw
    (cross,) = [t for t in fig.data if t.mode == "markers"]
    assert list(cross.x) == [100.0] and cross.marker.symbol == "x" and "NaN" in cross.name
    assert cross.y[0] < 10 ** fig.layout.yaxis.range[1]
    assert not [t for t in fig.data if t.mode == "lines"]  # the variance line belongs to the variance figure


def test_the_real_study_draws_and_keeps_its_order():
    study = precision.variance_error(means=(1.0, 100.0, 1e4), n=64, rows=4)
    fig = npic.precision_figure(study)
    one = next(t for t in fig.data if t.name == npic.METHOD_LABELS["one_pass"])
    two = next(t for t in fig.data if t.name == npic.METHOD_LABELS["two_pass"])
    assert one.y[-1] > two.y[-1]  # at mean 1e4 the one-pass variance is far worse


@pytest.mark.parametrize(("study", "which", "match"), [
    (STUDY, "var", "which must be"),
    ({"means": [1.0]}, "var_error", "variance_error"),
    ({**STUDY, "means": [0.0, 1.0, 2.0]}, "var_error", "positive"),
    ({**STUDY, "var_error": {"one_pass": [1.0]}}, "var_error", "1 errors for 3 means"),
])
def test_bad_studies_are_refused_by_name(study, which, match):
    with pytest.raises(ValueError, match=f"precision_figure: .*{match}"):
        npic.precision_figure(study, which=which)


def test_block_scales_are_drawn_one_cell_per_block_under_the_values():
    x = torch.randn(3, 96, generator=torch.Generator().manual_seed(0))
    x[2, 70] = 40.0
    exps = mxref.block_scales(x)
    fig = npic.block_scales_figure(x, exps)
    values, scales = fig.data
    assert len(values.z) == 3 and len(values.z[0]) == 96
    assert [list(r) for r in scales.z] == exps.tolist()
    assert list(scales.x) == [15.5, 47.5, 79.5]  # each block's cell centred under its 32 values
    assert scales.text[2][2] == str(int(exps[2, 2])) and int(exps[2, 2]) > int(exps[2, 0])
    assert "2^" in scales.hovertext[2][2]
    assert fig.layout.meta == {"blocks": 3, "rows": 3}
    edges = sorted({s.x0 for s in fig.layout.shapes})
    assert edges == [31.5, 63.5]  # the two block boundaries, in both panels


@pytest.mark.parametrize(("x", "exps", "block", "match"), [
    ([[1.0] * 64], [[0, 0]], 0, "block must be"),
    ([[1.0] * 64], [[0]], 32, r"exponents must be \[1, 2\]"),
    ([[1.0] * 60], [[0, 0]], 32, "multiple of block"),
    ("abc", [[0]], 32, "x must be a 2-D array"),
    ([[1.0, 2.0], [1.0]], [[0]], 1, "rows of one length"),
])
def test_bad_block_scale_inputs_are_refused_by_name(x, exps, block, match):
    with pytest.raises(ValueError, match=f"block_scales_figure: .*{match}"):
        npic.block_scales_figure(x, exps, block)


def _mx(x):
    codes, scales = mxref.quantize_mxfp4(x)
    return mxref.dequantize(codes, scales), scales.long() - 127


def test_the_explorer_slider_moves_one_blocks_scale():
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(1))
    box = npic.block_scales_explorer(x, _mx, row=1, col=40, value=2)
    before = [list(r) for r in box.figure.data[1].z]
    box.value_slider.value = 60
    after = [list(r) for r in box.figure.data[1].z]
    assert after[1][1] > before[1][1]  # block 1 of row 1 holds x[1, 40]: its exponent grows
    assert after[0] == before[0] and after[1][0] == before[1][0]  # no other block's scale moves
    assert box.figure.data[0].z[1][40] == 60.0 and float(x[1, 40]) != 60.0  # x itself is left alone
    assert "block 1 holds x[1, 40]" in box.info.value and f"{after[1]}".replace(".0", "") in box.info.value


def test_the_explorer_refuses_a_place_outside_x():
    with pytest.raises(ValueError, match=r"block_scales_explorer: \(row, col\) = \(2, 0\) is outside x \[2, 64\]"):
        npic.block_scales_explorer(torch.zeros(2, 64), _mx, row=2, col=0)
