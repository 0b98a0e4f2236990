"""Figure layout on a machine without a GPU: texts wrapped to fit, point labels that never sit on each other.

The browser test measures the rendered figures (tests/browser: nothing cut off at a figure's edge, no two texts
over each other); these check the layout the figures ask plotly for.
"""

from __future__ import annotations

import itertools
import re

import pytest

import workbench as wb
from workbench import plot_labels, plots

NONE_RECORDED = "No real-GPU results recorded yet for"


def _lines(text: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", line) for line in (text or "").split("<br>")]


def _annotations(fig, name: str) -> list:
    return [a for a in fig.layout.annotations if a.name == name]


FIGURES = {
    "roofline": lambda: wb.roofline(None, op="attention_bwd", dtype="float32"),
    "throughput": lambda: plots.throughput_vs_size(None, op="attention_bwd"),
    "compare": lambda: plots.compare_variants(None, op="attention_bwd"),
    "explorer": lambda: wb.explore("attention_bwd").roofline_figure.fig,
}


@pytest.mark.parametrize("make", FIGURES.values(), ids=FIGURES.keys())
def test_none_recorded_banner_is_wrapped_to_short_lines(make):
    """The banner was one ~95-character line, cut off at both edges of a figure at JupyterLab's default width."""
    fig = make()
    (banner,) = _annotations(fig, "none-recorded")
    lines = _lines(banner.text)
    assert lines[0] == f"{NONE_RECORDED} attention_bwd.", lines
    assert "`python -m workbench bench --op attention_bwd`" in lines, lines  # the command on one line, whole
    assert max(map(len, lines)) <= 52, lines  # ~340 px at 12 px: fits a plot at JupyterLab's default width
    assert banner.font.size <= 12


def test_long_titles_and_notes_are_wrapped_and_the_margins_grow():
    long_title = "moe on the H200 bf16 roofline: napkin points, and recorded runs where there are any, in detail"
    fig = wb.roofline(None, op="moe", dtype="bfloat16", title=long_title)
    title = _lines(fig.layout.title.text)
    assert " ".join(title[:2]) == long_title and max(len(line) for line in title[:2]) <= 70, title
    short = wb.roofline(None, op="moe", dtype="bfloat16", title="moe")
    assert fig.layout.margin.t > short.layout.margin.t  # room for the second title line
    notes = ["n" * 60 + " " + "m" * 60, "short note"]
    emu = plots._finish(plots.go.Figure(), "t", "s", notes, None)
    (note,) = _annotations(emu, "notes")
    assert _lines(note.text) == ["n" * 60, "m" * 60, "short note"]
    assert emu.layout.margin.b == 70 + 15 * 3


def _label_names(fig) -> list[list[str]]:
    return [re.findall(r">([^<]+)</span>", a.text) for a in _annotations(fig, "point-label")]


def test_coinciding_points_share_one_label_naming_each():
    """The tour's four vecadd variants sit at one point: their labels were drawn on top of each other."""
    box = wb.explore("vecadd")
    names = [v.name for v in wb.variants("vecadd")]
    assert _label_names(box.roofline_figure.fig) == [names]
    for a in _annotations(box.roofline_figure.fig, "point-label"):  # each name in its variant's colour
        for n in names:
            assert f"color:{plots.variant_color(n)}'>{n}</span>" in a.text


def test_a_crowd_at_one_point_is_counted_not_listed():
    box = wb.explore("gemm")
    (label,) = _annotations(box.roofline_figure.fig, "point-label")
    n = len(wb.variants("gemm"))
    assert _lines(label.text)[0] == f"{n} variants:"
    assert f"and {n - 3} more (see the legend)" in label.text.replace("<br>", " ")


def _boxes(fig, width: float) -> list[tuple[str, tuple[float, float, float, float]]]:
    """Estimate each label's px box in a plot ``width`` px wide, as the layout does."""
    out = []
    for a in [*_annotations(fig, "point-label"), *_annotations(fig, "ridge")]:
        w, h = plot_labels.text_box(a.text, a.font.size)
        x, y = plot_labels.to_px(fig, 10 ** a.x, 10 ** a.y, width)
        out.append((a.text, plot_labels.spot_box((x, y), (a.ax, a.ay, a.xanchor, a.yanchor), (w + 6, h + 4))))
    return out


def test_distinct_points_get_labels_that_do_not_overlap_at_any_supported_width():
    """Seven napkin points along the roof (04's MoE roofline): each named once, no two names over each other."""
    points = [{"label": f"model {i}", "intensity": x} for i, x in enumerate((1, 2.3, 4.1, 16, 130, 250, 1000))]
    fig = wb.roofline(None, device="H200", dtype="bfloat16", points=points, op="moe")
    assert sorted(n for names in _label_names(fig) for n in names) == sorted(p["label"] for p in points)
    for width in plot_labels.PLOT_WIDTHS:
        for (ta, a), (tb, b) in itertools.combinations(_boxes(fig, width), 2):
            assert plot_labels.overlap(a, b, pad=0) == 0, f"at {width} px: {ta!r} overlaps {tb!r}"


def test_labels_follow_the_explorer_controls():
    box = wb.explore("softmax")
    before = _label_names(box.roofline_figure.fig)
    box.variant_select.value = box.variant_select.value[:2]
    after = _label_names(box.roofline_figure.fig)
    assert len(before[0]) > 2 and after == [list(box.variant_select.value)]
