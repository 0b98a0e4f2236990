"""workbench.figure_view.FigureView: a plotly figure in an ipywidgets Output, redrawn on replace or batch edit."""

from __future__ import annotations

import ast
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import pytest

from workbench.figure_view import PLOTLY_MIME, FigureView, display_output

REPO = Path(__file__).resolve().parents[1]


def _shown(view: FigureView) -> dict:
    (out,) = view.outputs
    assert out["output_type"] == "display_data"
    return out["data"][PLOTLY_MIME]


def test_a_view_shows_its_figure_as_the_plotly_display_a_cell_shows():
    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], name="b"), layout=dict(height=320, title="t"))
    view = FigureView(fig)
    assert isinstance(view, widgets.Output) and view.fig is fig and view.data == fig.data
    shown = _shown(view)
    assert shown["data"][0]["name"] == "b" and shown["layout"]["height"] == 320
    assert view.outputs[0]["data"]["text/plain"] == "<plotly figure: t, 1 trace(s)>"
    assert view.layout.min_height == "320px"  # the box keeps its height while the figure redraws
    assert FigureView().layout.min_height == "450px"  # plotly.js's own default height


def test_redraw_replaces_the_figure_and_batch_update_redraws_once_on_exit():
    view = FigureView(go.Figure(go.Scatter(x=[0], y=[1])))
    view.redraw(go.Figure([go.Scatter(x=[0], y=[2]), go.Scatter(x=[1], y=[3])]))  # any trace structure
    assert len(_shown(view)["data"]) == 2
    drawn = []
    view.observe(lambda ch: drawn.append(ch), names="outputs")
    with view.batch_update() as f:
        f.data[0].y = [5]
        f.data[1].name = "edited"
        assert not drawn  # nothing is sent mid-edit
    assert len(drawn) == 1
    assert _shown(view)["data"][1]["name"] == "edited" and list(view.data[0].y) == [5]
    view.redraw({"data": [{"type": "bar", "y": [1]}], "layout": {"height": 200}})  # a figure dict is accepted
    assert view.fig.data[0].type == "bar" and view.layout.min_height == "200px"


def test_nan_cells_are_sent_as_gaps_not_as_invalid_json():
    import json

    out = display_output(go.Figure(go.Heatmap(z=[[1.0, float("nan")], [2.0, 3.0]])))
    text = json.dumps(out, allow_nan=False)  # a widget message is strict JSON
    assert "NaN" not in text
    out = display_output(go.Figure(go.Heatmap(z=np.array([[1.0, np.nan]]))))
    json.dumps(out, allow_nan=False)


def test_a_wrong_figure_is_refused_naming_the_call():
    with pytest.raises(TypeError, match=r"FigureView: expected a plotly go.Figure or a figure dict, got list"):
        FigureView([1, 2])


def test_no_workbench_picture_builds_a_plotly_figure_widget():
    """go.FigureWidget drops its updates when plotly.js loads in over 2 s (anywidget 0.11): pictures use FigureView."""
    found = []
    for path in sorted((REPO / "workbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "FigureWidget":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found
