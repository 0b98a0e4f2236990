"""Notebook 08's figures: busbw against size (model lines, measured points), timelines per rank."""

from __future__ import annotations

import re

import pytest

from workbench import comm_model as cm
from workbench import comm_pictures as cp
from workbench.plots import _NOTE_CHARS, _TITLE_CHARS

SIZES = [2**k for k in range(10, 31, 4)]


def _text_lines(text: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", line) for line in (text or "").split("<br>")]


def test_busbw_figure_labels_model_lines_and_measured_points():
    rows = [dict(name="ring", bytes=b, busbw_GBps=0.5, world=4, where="gloo on this CPU") for b in (1024, 65536)]
    fit = dict(label="ring, fit", algorithm="ring", world=4, bandwidth_gbs=2.0, latency_us=40.0)
    fig = cp.busbw_figure(SIZES, 8, measured=rows, fits=[fit])
    model = [t for t in fig.data if t.legendgroup == "model"]
    assert [t.name for t in model] == ["naive", "ring", "halving_doubling", "tree"]
    assert all("(model)" in t.hovertemplate for t in model)
    assert model[0].legendgrouptitle.text.startswith("model: 8 ranks")
    ring = model[1]
    assert ring.y[-1] == pytest.approx(cm.all_reduce_model("ring", SIZES[-1], 8).busbw_gbs)
    (meas,) = [t for t in fig.data if t.legendgroup == "measured"]
    assert "gloo, this CPU" in meas.legendgrouptitle.text and list(meas.y) == [0.5, 0.5]
    (fitted,) = [t for t in fig.data if t.legendgroup == "fit"]
    assert fitted.line.dash == "dash"
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    notes = [a for a in fig.layout.annotations if a.name == "notes"]
    assert all(len(line) <= _NOTE_CHARS for a in notes for line in _text_lines(a.text))
    assert all(len(line) <= _TITLE_CHARS for line in _text_lines(fig.layout.title.text)[:1])
    with pytest.raises(ValueError, match="sizes must be positive"):
        cp.busbw_figure([0, 10])


def test_timeline_lanes_and_kinds():
    events = [dict(rank=0, op="compute", peer=None, bytes=0, t_start=0.0, t_end=2e-3, note="block 0"),
              dict(rank=0, op="isend", peer=1, bytes=64, t_start=1e-4, t_end=1e-4, note=""),
              dict(rank=1, op="irecv", peer=0, bytes=64, t_start=1e-4, t_end=1.2e-4, note=""),
              dict(rank=1, op="wait", peer=0, bytes=64, t_start=1.2e-4, t_end=2.5e-3, note=""),
              dict(rank=1, op="all_reduce", peer=-1, bytes=64, t_start=2.5e-3, t_end=3e-3, note="")]
    fig = cp.timeline_figure(events)
    kinds = {t.name: t for t in fig.data}
    assert set(kinds) == {"compute", "send", "recv", "wait", "collective"}
    assert list(kinds["compute"].y) == ["rank 0 compute"] and list(kinds["wait"].y) == ["rank 1 comm"]
    assert kinds["send"].x[0] > 0  # a zero-length posting is drawn a hair wide
    assert fig.layout.xaxis.title.text == "time (ms)"
    assert cp.EMULATED_LABEL in fig.layout.annotations[0].text
    with pytest.raises(ValueError, match="t_start <= t_end"):
        cp.timeline_figure([dict(rank=0, op="send", peer=1, bytes=1, t_start=1.0, t_end=0.5)])


def test_stacked_timelines_have_their_own_axes_and_labels():
    emu = cm.model_events("ring", 3, 3e3, "ib_ndr")
    gpu = cm.model_events("ring", 8, 8e6, "nvlink4", reduce_gbs=1600)
    fig = cp.timelines_figure([(cp.EMULATED_LABEL, emu), ("model: 8x H200, NVLink 4", gpu)])
    titles = [a.text for a in fig.layout.annotations]
    assert cp.EMULATED_LABEL in titles[0] and "model: 8x H200" in titles[1]
    assert fig.layout.xaxis.title.text == "time (us)" and fig.layout.xaxis2.title.text == "time (us)"
    lanes = set(fig.layout.yaxis2.categoryarray)
    assert lanes == {f"rank {r} {k}" for r in range(8) for k in ("compute", "comm")}
    assert fig.layout.height >= 20 * (6 + 16)


def test_busbw_explorer_redraws_the_model_for_another_world_and_link():
    rows = [dict(name="ring", bytes=1024, busbw_GBps=0.5, world=4)]
    box = cp.busbw_explorer(SIZES, measured=rows)
    ring = lambda: next(t for t in box.figure.data if t.legendgroup == "model" and t.name == "ring")  # noqa: E731
    before = list(ring().y)
    box.world_slider.value = 2
    assert list(ring().y) != before
    assert ring().y[0] == pytest.approx(cm.all_reduce_model("ring", SIZES[0], 2).busbw_gbs)
    box.link_dropdown.value = "ib_ndr"
    assert ring().y[-1] == pytest.approx(cm.all_reduce_model("ring", SIZES[-1], 2, "ib_ndr").busbw_gbs)
    assert "InfiniBand" in box.figure.fig.layout.title.text
    assert [t.y[0] for t in box.figure.data if t.legendgroup == "measured"] == [0.5]
