"""A plotly figure inside an ipywidgets box that a control can redraw: ``FigureView``.

Every picture with a slider or dropdown (explorers, decode/norm/comm/CuTe pictures, the drill browser) shows its
figure through this widget. It is an ``ipywidgets.Output`` holding one plotly display output, the same output a
notebook cell shows for ``fig``: JupyterLab's plotly renderer (``jupyterlab-plotly``) draws it, with the plotly.js
it loads once per page.

Why not ``go.FigureWidget``: in plotly 7 it is an anywidget that sends plotly.js itself (a 5 MB module) with every
figure, which the browser loads once per figure: 1.4 s for one, 2.5 s for two at once and 5.3 s for four in
Chromium 156 on a 2-core machine like CI's, idle. anywidget 0.11 rejects a model whose module takes over 2 s to load and
then drops every later message to it: on a busy or slow machine a figure drew once and never followed its slider,
and the page logged "[anywidget] Failed to initialize model." (CI, 2026-12-07).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go
import plotly.io as pio

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_DEFAULT_HEIGHT_PX = 450  # plotly.js's height when a layout sets none


def display_output(fig: go.Figure) -> dict[str, Any]:
    """Return ``fig`` as one nbformat display output: plotly's JSON bundle and a line of plain text."""
    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else "untitled"
    bundle["text/plain"] = f"<plotly figure: {title}, {len(fig.data)} trace(s)>"
    return {"output_type": "display_data", "data": bundle, "metadata": {}}


class FigureView(widgets.Output):
    """Show one plotly figure in a widget box; ``redraw(fig)`` replaces it, ``batch_update()`` edits it.

    ``view.fig`` is the figure on show (a ``go.Figure``) and ``view.data`` its traces, so code written against
    ``go.FigureWidget``'s ``data`` reads the same. Edits to ``view.fig`` show once ``redraw()`` runs, which
    ``batch_update()`` does on exit. The widget keeps the figure's height while it redraws, so the page does not
    jump under the learner's control.
    """

    def __init__(self, fig: go.Figure | dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fig = go.Figure()
        self._depth = 0
        self.redraw(fig if fig is not None else go.Figure())

    @property
    def fig(self) -> go.Figure:
        """Return the figure on show."""
        return self._fig

    @property
    def data(self) -> tuple:
        """Return the traces of the figure on show."""
        return self._fig.data

    def redraw(self, fig: go.Figure | dict | None = None) -> None:
        """Show ``fig`` in place of the current figure (``None``: the current figure, after in-place edits)."""
        if fig is not None:
            if not isinstance(fig, (go.Figure, dict)):
                raise TypeError(f"FigureView: expected a plotly go.Figure or a figure dict, got "
                                f"{type(fig).__name__}")
            self._fig = fig if isinstance(fig, go.Figure) else go.Figure(fig)
        if self._depth:
            return
        height = self._fig.layout.height or _DEFAULT_HEIGHT_PX
        self.layout.min_height = f"{int(height)}px"
        self.outputs = (display_output(self._fig),)

    @contextmanager
    def batch_update(self) -> Iterator[go.Figure]:
        """Yield the figure to edit in place; redraw it once, on leaving the block (also after an error)."""
        self._depth += 1
        try:
            yield self._fig
        finally:
            self._depth -= 1
            self.redraw()
