"""The drill browser: dropdowns for topic, kind and level, a chart of the selection, the chosen drill's statement."""

from __future__ import annotations

from typing import Any

from workbench.practice.base import KINDS, LEVELS, TOPICS, Drill

ALL = "all"
_COLOURS = {"easy": "#2da44e", "medium": "#bf8700", "hard": "#cf222e"}


def select(drills: list[Drill], topic: str, kind: str, level: str) -> list[Drill]:
    """Return the drills matching the three dropdowns ("all" matches anything)."""
    return [d for d in drills if topic in (ALL, d.topic) and kind in (ALL, d.kind) and level in (ALL, d.level)]


def figure(chosen: list[Drill], title: str) -> Any:
    """Return a bar chart of ``chosen``: one bar per kind, stacked by level."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for lv in LEVELS:
        fig.add_bar(name=lv, x=[k.replace("_", "-") for k in KINDS],
                    y=[sum(d.kind == k and d.level == lv for d in chosen) for k in KINDS], marker_color=_COLOURS[lv],
                    hovertemplate="%{x}: %{y} " + lv + " drill(s)<extra></extra>")
    fig.update_layout(barmode="stack", title=title, height=300, yaxis_title="drills", legend_title="level",
                      margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def browser() -> Any:
    """Return an ipywidgets box: topic/kind/level dropdowns, a chart of the selection, a list, the chosen drill.

    The box exposes ``topic``, ``kind``, ``level`` (dropdowns), ``chart`` (a ``FigureView``), ``choice``
    (the list of matching drills), ``out`` (where the chosen drill's statement shows) and ``chosen()`` (its handle).
    """
    import ipywidgets as w

    from workbench.figure_view import FigureView
    from workbench.practice import catalogue

    drills = list(catalogue().values())
    topic = w.Dropdown(options=[ALL, *TOPICS], value=ALL, description="topic")
    kind = w.Dropdown(options=[ALL, *KINDS], value=ALL, description="kind")
    level = w.Dropdown(options=[ALL, *LEVELS], value=ALL, description="level")
    chart = FigureView(figure(drills, f"{len(drills)} drills"))
    choice = w.Select(options=[], rows=8, description="drill", layout=w.Layout(width="640px"))
    out = w.Output(layout=w.Layout(border="1px solid #d0d7de", padding="6px"))

    def refresh(_: Any = None) -> None:
        chosen = select(drills, topic.value, kind.value, level.value)
        what = ", ".join(f"{k}={v.value}" for k, v in (("topic", topic), ("kind", kind), ("level", level))
                         if v.value != ALL) or "all drills"
        chart.redraw(figure(chosen, f"{len(chosen)} drill(s): {what}"))
        choice.options = [(f"{d.id}  ({d.kind.replace('_', '-')}, {d.level}): {d.title}", d.id) for d in chosen]
        choice.value = chosen[0].id if chosen else None

    held: dict[str, Drill | None] = {"drill": None}  # the handle shown is the handle chosen() returns

    def show(_: Any = None) -> None:
        out.clear_output()
        held["drill"] = catalogue()[choice.value].fresh() if choice.value else None
        if held["drill"] is not None:
            with out:
                from IPython.display import Markdown, display

                d = held["drill"]
                display(Markdown(d._full_markdown() + "\n\nAnswer this one (same option order): `d = <the browser>"
                                 f".chosen()`; a new handle, `wb.drill({d.id!r})`, shuffles its options again."))

    for dd in (topic, kind, level):
        dd.observe(refresh, names="value")
    choice.observe(show, names="value")
    refresh()
    box = w.VBox([w.HBox([topic, kind, level]), chart, choice, out])
    box.topic, box.kind, box.level, box.chart, box.choice, box.out = topic, kind, level, chart, choice, out
    box.chosen = lambda: held["drill"]
    return box
