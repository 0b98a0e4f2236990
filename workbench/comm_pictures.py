"""Draw notebook 08's communication: busbw against message size, and a timeline per rank like Nsight Systems.

:func:`busbw_figure` draws the alpha-beta model's busbw of each all-reduce algorithm (:mod:`workbench.comm_model`,
lines labelled "model" with the link and world they assume) against message size on log axes, with measured points
(rows of ``workbench.comm_time.time_collective``, labelled "gloo, this CPU") and optional model lines fitted to them.
:func:`timeline_figure` draws recorded events (``rank, op, peer, bytes, t_start, t_end``: the tracer's
``comm.Event`` or a dict, e.g. :func:`workbench.comm_model.model_events`) as bars, two lanes per rank: "compute"
(spans the kernels mark) and "comm" (send / recv / wait / collectives), so that communication hidden under compute
shows as bars on both lanes at once. :func:`timelines_figure` stacks several timelines (an emulated run above the
model's 8x H200 node), each with its own time axis and label. Plotly is imported here, not with ``workbench``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import comm_model, hardware
from workbench.plots import _finish, _wrap

__all__ = ["EMULATED_LABEL", "KIND_COLORS", "MEASURED_LABEL", "busbw_explorer", "busbw_figure", "event_kind",
           "timeline_figure", "timelines_figure"]

MEASURED_LABEL = "gloo, this CPU"
EMULATED_LABEL = "emulated wall time (gloo, CPU)"
#: Bar colours by kind of event, Nsight-like: compute blue, sends orange, receives green, waits red.
KIND_COLORS = {"compute": "#1f77b4", "wait": "#d62728", "send": "#ff7f0e", "recv": "#2ca02c",
               "collective": "#9467bd", "mark": "#444444"}  # in drawing order: transfers over the waits
_ALG_COLORS = {"naive": "#7f7f7f", "ring": "#1f77b4", "halving_doubling": "#2ca02c", "ring_pipelined": "#ff7f0e",
               "tree": "#9467bd"}
_COLLECTIVE_OPS = {"all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                   "all_to_all", "all_to_all_single", "broadcast", "barrier", "reduce", "gather", "scatter"}


def _sizes(sizes: Iterable[float]) -> list[float]:
    out = sorted({float(s) for s in sizes})
    if not out or any(not math.isfinite(s) or s <= 0 for s in out):
        raise ValueError(f"busbw_figure: sizes must be positive byte counts (a log axis), got {list(sizes)!r:.80}")
    return out


def _human_bytes(b: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def busbw_figure(sizes: Iterable[float], world: int = 8, *, link: str = "nvlink4",
                 algorithms: Sequence[str] = ("naive", "ring", "halving_doubling", "tree"),
                 measured: Sequence[Mapping[str, Any]] | None = None,
                 fits: Sequence[Mapping[str, Any]] | None = None, title: str | None = None) -> go.Figure:
    """Return busbw (GB/s) against message size (bytes per rank) per all-reduce algorithm, on log axes.

    Model lines: :func:`workbench.comm_model.all_reduce_model` for each of ``algorithms`` on ``world`` ranks over
    ``link``. ``measured``: rows with ``name``, ``bytes``, ``busbw_GBps`` (and ``world``), drawn as points labelled
    "gloo, this CPU". ``fits``: dicts ``label, algorithm, world, bandwidth_gbs, latency_us`` drawn as dashed model
    lines (e.g. the ring with alpha and beta fitted to the measured points).
    """
    xs = _sizes(sizes)
    spec = hardware.get_link(link)
    fig = go.Figure()
    group = f"model: {world} ranks, {spec.name.split(' (')[0]}"
    for alg in algorithms:
        ys = [comm_model.all_reduce_model(alg, s, world, link).busbw_gbs for s in xs]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name=alg, legendgroup="model", legendgrouptitle_text=group,
            line=dict(color=_ALG_COLORS.get(alg), width=2),
            hovertemplate=f"{alg} (model): %{{x:.3s}} B, busbw %{{y:.3g}} GB/s<extra></extra>"))
    for fit in fits or []:
        ys = [comm_model.all_reduce_model(fit["algorithm"], s, fit["world"], bandwidth_gbs=fit["bandwidth_gbs"],
                                          latency_us=fit["latency_us"]).busbw_gbs for s in xs]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name=fit["label"], legendgroup="fit",
            legendgrouptitle_text="model fitted to gloo", line=dict(color=_ALG_COLORS.get(fit["algorithm"]),
                                                                    dash="dash"),
            hovertemplate=f"{fit['label']} (model): %{{x:.3s}} B, busbw %{{y:.3g}} GB/s<extra></extra>"))
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for row in measured or []:
        by_name.setdefault(str(row["name"]), []).append(row)
    for name, rows in by_name.items():
        rows = sorted(rows, key=lambda r: r["bytes"])
        w = rows[0].get("world", "?")
        fig.add_trace(go.Scatter(
            x=[r["bytes"] for r in rows], y=[r["busbw_GBps"] for r in rows], mode="markers+lines",
            name=name, legendgroup="measured", legendgrouptitle_text=f"{MEASURED_LABEL}, {w} ranks",
            line=dict(color=_ALG_COLORS.get(name, "#444444"), dash="dot", width=1), marker=dict(size=8),
            hovertemplate=f"{name} ({MEASURED_LABEL}): %{{x:.3s}} B, busbw %{{y:.3g}} GB/s<extra></extra>"))
    fig.update_xaxes(type="log", title_text="message size per rank (bytes)")
    fig.update_yaxes(type="log", title_text="busbw (GB/s)")
    notes = [f"Lines: alpha-beta model, {spec.bandwidth_gbs:g} GB/s per direction ({spec.source.document.split(';')[0]}"
             f"), {spec.latency_us:g} us per step (an assumption). busbw = S/t * 2(n-1)/n (nccl-tests)."]
    if measured:
        notes.append("Points: measured on this machine's CPU with gloo (processes on one host: shared memory and "
                     "loopback TCP, not a GPU link).")
    head = title or f"all-reduce busbw against message size ({world} ranks, model)"
    return _finish(fig, head, "", notes, None)


def busbw_explorer(sizes: Iterable[float], *, world: int = 8, link: str = "nvlink4",
                   measured: Sequence[Mapping[str, Any]] | None = None,
                   fits: Sequence[Mapping[str, Any]] | None = None) -> Any:
    """Return :func:`busbw_figure` under a world-size slider and a link dropdown (an ipywidgets VBox).

    Moving the slider or picking another link of :data:`workbench.hardware.LINKS` redraws the model's lines; the
    measured points and fitted lines stay. The box exposes ``world_slider``, ``link_dropdown`` and ``figure``.
    """
    import ipywidgets as widgets

    from workbench.figure_view import FigureView

    def figure(n: int, key: str) -> go.Figure:
        name = hardware.get_link(key).name.split(" (")[0]
        title = f"all-reduce busbw: model for {n} GPUs on {name}" + (", measured on gloo here" if measured else "")
        return busbw_figure(sizes, n, link=key, measured=measured, fits=fits, title=title)

    fig = FigureView(figure(world, link))
    slider = widgets.IntSlider(value=world, min=2, max=64, step=1, description="GPUs", continuous_update=False)
    dropdown = widgets.Dropdown(options=[(v.name.split(" (")[0], k) for k, v in hardware.LINKS.items()], value=link,
                                description="link")

    def refresh(*_: Any) -> None:
        fig.redraw(figure(slider.value, dropdown.value))

    slider.observe(refresh, names="value")
    dropdown.observe(refresh, names="value")
    box = widgets.VBox([widgets.HBox([slider, dropdown]), fig])
    box.world_slider, box.link_dropdown, box.figure = slider, dropdown, fig
    return box


# ------------------------------------------------------------------------------------------------------- timelines


def _field(ev: Any, name: str) -> Any:
    return ev[name] if isinstance(ev, Mapping) else getattr(ev, name)


def event_kind(op: str) -> str:
    """Return the bar kind of a recorded op: compute, send, recv, wait, collective or mark."""
    if op in ("compute", "send", "recv", "wait", "mark"):
        return op
    if op in ("isend",):
        return "send"
    if op in ("irecv",):
        return "recv"
    if op in _COLLECTIVE_OPS:
        return "collective"
    return "compute" if op.startswith("compute") else "collective"


def _lanes(events: Sequence[Any]) -> tuple[list[dict[str, Any]], list[int]]:
    rows = []
    for ev in events:
        t0, t1 = float(_field(ev, "t_start")), float(_field(ev, "t_end"))
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 < t0:
            raise ValueError(f"timeline_figure: an event must have finite t_start <= t_end, got {t0}..{t1} in "
                             f"{ev!r:.120}")
        op = str(_field(ev, "op"))
        kind = event_kind(op)
        note = _field(ev, "note") if (isinstance(ev, Mapping) and "note" in ev) or hasattr(ev, "note") else ""
        rows.append(dict(rank=int(_field(ev, "rank")), op=op, kind=kind, peer=_field(ev, "peer"),
                         bytes=_field(ev, "bytes"), t0=t0, t1=t1, note=note or ""))
    ranks = sorted({r["rank"] for r in rows})
    return rows, ranks


def _unit(span_s: float) -> tuple[str, float]:
    if span_s >= 0.5:
        return "s", 1.0
    if span_s >= 5e-4:
        return "ms", 1e3
    return "us", 1e6


def _add_timeline(fig: go.Figure, events: Sequence[Any], row: int, shown: set[str]) -> str:
    """Add one timeline's bars to subplot ``row``; return the time unit used."""
    rows, ranks = _lanes(events)
    if not rows:
        raise ValueError("timeline_figure: no events to draw (was the run traced?)")
    t_min = min(r["t0"] for r in rows)
    unit, scale = _unit(max(r["t1"] for r in rows) - t_min)
    lane = {}
    for rank in ranks:
        lane[(rank, "comm")] = f"rank {rank} comm"
        lane[(rank, "compute")] = f"rank {rank} compute"
    order = [lane[(r, k)] for r in ranks for k in ("compute", "comm")]
    for kind, color in KIND_COLORS.items():
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        # a zero-length call (posting an isend) is drawn a hair wide so that it shows
        width = max(r["t1"] for r in rows) - t_min
        fig.add_trace(go.Bar(
            x=[max(r["t1"] - r["t0"], width * 2e-3) * scale for r in sel],
            base=[(r["t0"] - t_min) * scale for r in sel],
            y=[lane[(r["rank"], "compute" if kind == "compute" else "comm")] for r in sel], orientation="h",
            marker=dict(color=color, line=dict(width=0)), name=kind, legendgroup=kind, showlegend=kind not in shown,
            customdata=[[r["op"], "" if r["peer"] is None else r["peer"], r["bytes"], r["note"]] for r in sel],
            hovertemplate=("rank %{y}: %{customdata[0]} peer %{customdata[1]}, %{customdata[2]} B, "
                           f"%{{base:.4g}}..+%{{x:.3g}} {unit} %{{customdata[3]}}<extra></extra>")),
            row=row, col=1)
        shown.add(kind)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(order)), row=row, col=1)
    return unit


def timelines_figure(panels: Sequence[tuple[str, Sequence[Any]]], *, title: str = "timeline per rank") -> go.Figure:
    """Return one timeline per ``(label, events)`` panel, stacked, each with its own time axis (its label above).

    Two lanes per rank: compute (marked spans) and comm (sends, receives, waits, collectives); bars: blue compute,
    orange send, green recv, red wait, purple a torch collective. Times start at each panel's first event.
    """
    if not panels:
        raise ValueError("timelines_figure: needs at least one (label, events) panel")
    lanes = [2 * len(_lanes(ev)[1]) for _, ev in panels]
    height = 140 + 20 * sum(lanes) + 90 * len(panels)
    gap_px = 95  # between panels: the time axis's title above, the next panel's label below
    plot_px = height - 140  # the figure's height less the margins _finish leaves for the title and the axis
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=min(0.4, gap_px / plot_px) if len(panels) > 1
                        else 0.0,
                        row_heights=[n / sum(lanes) for n in lanes],
                        subplot_titles=["<br>".join(_wrap(label, 72)) for label, _ in panels])
    for a in fig.layout.annotations:  # the panels' labels: small enough for JupyterLab's default width
        a.font = dict(size=12)
    shown: set[str] = set()
    for i, (_, events) in enumerate(panels, 1):
        unit = _add_timeline(fig, events, i, shown)
        fig.update_xaxes(title_text=f"time ({unit})", row=i, col=1, rangemode="tozero")
    fig.update_layout(barmode="overlay", bargap=0.25)
    out = _finish(fig, title, "", [], None)
    out.update_layout(height=height, legend=dict(tracegroupgap=2))
    return out


def timeline_figure(events: Sequence[Any], *, label: str = EMULATED_LABEL, title: str = "timeline per rank",
                    ) -> go.Figure:
    """Return one timeline of ``events`` (see :func:`timelines_figure`) with ``label`` over its time axis."""
    return timelines_figure([(label, events)], title=title)
