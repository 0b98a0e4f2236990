"""Notebook 04's routing explorer: its bars follow the skew slider, its loads are the moe contract's routing."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly.graph_objects", reason="plotly is not installed (notebook wheels not carried)")
pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (notebook wheels not carried)")

import torch  # noqa: E402

from workbench import plots  # noqa: E402

SMALL = {"T": 256, "E": 16, "top_k": 2}


def test_returns_a_box_with_the_slider_the_figure_and_the_info():
    import ipywidgets as widgets

    box = plots.routing_explorer(**SMALL)
    assert isinstance(box, widgets.VBox)
    assert list(box.children) == [box.skew_slider, box.info, box.figure]
    assert [t.type for t in box.figure.data] == ["bar", "bar"]
    assert list(box.figure.data[0].x) == list(range(16))
    assert box.skew_slider.value == 2.0 and box.skew_slider.description == "router skew"
    assert "top-2" in box.figure.fig.layout.title.text


def test_moving_the_slider_redraws_the_skewed_bars_only():
    box = plots.routing_explorer(**SMALL)
    uniform, skewed = list(box.figure.data[0].y), list(box.figure.data[1].y)
    info = box.info.value
    box.skew_slider.value = 4.0
    assert list(box.figure.data[0].y) == uniform  # the uniform router stays
    assert list(box.figure.data[1].y) != skewed
    assert box.info.value != info and "imbalance <b>" in box.info.value
    imb = box.imbalance(4.0)
    assert f"max/mean {imb:.2f}" in box.figure.data[1].name and f"<b>{imb:.2f}</b>" in box.info.value
    box.skew_slider.value = 0.0  # no skew: the same bars as the uniform router
    assert list(box.figure.data[1].y) == uniform


def test_loads_count_every_slot_and_skew_raises_the_imbalance():
    box = plots.routing_explorer(**SMALL)
    for s in (0.0, 2.0, 4.0):
        counts, imb = box.loads(s)
        assert sum(counts) == 256 * 2 and len(counts) == 16
        assert imb == pytest.approx(max(counts) / (256 * 2 / 16))
    assert box.imbalance(0.0) >= 1.0
    assert box.imbalance(4.0) > box.imbalance(2.0) > box.imbalance(0.0)


def test_loads_are_the_moe_contracts_routing():
    from kernels.moe.reference import route

    T, E, k = 64, 8, 2
    box = plots.routing_explorer(T=T, E=E, top_k=k, seed=3, skew=0.0)
    logits = torch.randn(T, E, generator=torch.Generator().manual_seed(3))
    want = torch.bincount(route(logits, k)[1].reshape(-1), minlength=E).tolist()
    assert box.loads(0.0)[0] == want == list(box.figure.data[1].y)


@pytest.mark.parametrize("kw,match", [
    ({"T": 0}, "T must be an int >= 1"),
    ({"E": 2.5}, "E must be an int >= 1"),
    ({"top_k": True}, "top_k must be an int >= 1"),
    ({"E": 4, "top_k": 5}, r"top_k must be in \[1, E=4\]"),
    ({"seed": -1}, "seed must be an int >= 0"),
    ({"skew": -1.0}, "skew must be a finite number >= 0"),
    ({"max_skew": float("inf")}, "max_skew must be a finite number >= 0"),
    ({"skew": 5.0}, "skew must be <= max_skew=4.0"),
])
def test_bad_arguments_name_the_function(kw, match):
    with pytest.raises(ValueError, match=f"routing_explorer: {match}"):
        plots.routing_explorer(**{**SMALL, **kw})
