"""Draw benchmark results and napkin-math predictions: throughput, variant bars, rooflines, and an explorer.

Figures take records in the format of :mod:`workbench.results`. Only real-GPU measurements are drawn as
performance: emulated records are excluded with a visible note, and a figure with no real records says so
("No real-GPU results recorded yet for <op> ..."). Predictions (napkin math) are drawn in their own legend
group with open markers, never styled as measurements. Each variant keeps one colour across all figures of
the session (:func:`variant_color`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

from workbench import hardware
from workbench.results import validate_record

__all__ = [
    "compare_variants",
    "explorer",
    "roofline",
    "save_html",
    "throughput_vs_size",
    "variant_color",
]

_UNITS = {"tflops": "TFLOP/s", "gbps": "GB/s"}
_PALETTE = list(qualitative.D3) + list(qualitative.Dark24)
_COLORS: dict[str, str] = {}
_ROOF = "#222222"
_CONTEXT = "#9a9a9a"
_MEASURED_CEIL = "#c0392b"
_HEIGHT = 470


class _SkipPeak(Exception):
    pass


def variant_color(name: str) -> str:
    """Return the colour of variant ``name``: assigned on first use, then the same in every figure."""
    if name not in _COLORS:
        _COLORS[name] = _PALETTE[len(_COLORS) % len(_PALETTE)]
    return _COLORS[name]


# ---------------------------------------------------------------------------------------------------------
# helpers


def _prepare(records: Iterable[Mapping[str, Any]] | None) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Validate records; return the real-GPU ones and notes about what was excluded."""
    recs = list(records or [])
    for r in recs:
        validate_record(r)
    real = [r for r in recs if not r["emulated"]]
    notes = []
    if len(real) < len(recs):
        notes.append(
            f"{len(recs) - len(real)} emulated (CPU) record(s) excluded: emulated times are not GPU performance."
        )
    return real, notes


def _check_metric(metric: str) -> str:
    if metric not in _UNITS:
        raise ValueError(f"metric must be one of {sorted(_UNITS)}, got {metric!r}")
    return metric


def _none_recorded(op: str | None) -> str:
    name = op or "this op"
    flag = f" --op {op}" if op else ""
    return f"No real-GPU results recorded yet for {name}: run `python -m workbench bench{flag}` on a GPU machine"


def _provenance(records: Sequence[Mapping[str, Any]]) -> str:
    gpus = sorted({r["device"]["name"] for r in records})
    dates = sorted({r["date"][:10] for r in records})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return f"recorded on {', '.join(gpus)}, {when}"


def _shape_str(shape: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def _series_key(rec: Mapping[str, Any], multi_dtype: bool, multi_device: bool) -> str:
    name = rec["variant"]
    extra = []
    if multi_dtype:
        extra.append(rec["dtype"])
    if multi_device:
        extra.append(rec["device"]["name"])
    return f"{name} ({', '.join(extra)})" if extra else name


def _pick_size_key(records: Sequence[Mapping[str, Any]], size_key: str | None) -> tuple[str | None, str]:
    """Return (shape key or None for the product of all dims, axis label)."""
    if size_key is not None:
        for r in records:
            if size_key not in r["shape"]:
                raise KeyError(
                    f"size_key {size_key!r} is not in the shape {r['shape']} of {r['op']}/{r['variant']}; "
                    f"expected one of {sorted(r['shape'])}"
                )
        return size_key, size_key
    if not records:
        return None, "problem size"
    common = [k for k in records[0]["shape"] if all(k in r["shape"] for r in records)]
    varying = [k for k in common if len({r["shape"][k] for r in records}) > 1]
    if len(varying) == 1:
        return varying[0], varying[0]
    if varying and all(len({r["shape"][k] for k in varying}) == 1 for r in records):
        return varying[0], " = ".join(varying)  # e.g. square GEMMs: M = N = K
    if len(common) == 1:
        return common[0], common[0]
    return None, "problem size (" + "·".join(common) + ")"


def _size(rec: Mapping[str, Any], key: str | None) -> float:
    return float(rec["shape"][key]) if key else float(math.prod(rec["shape"].values()))


def _spread(values: Sequence[float]) -> float:
    pos = [v for v in values if v and v > 0]
    return max(pos) / min(pos) if pos else 1.0


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "n/a"
    return f"{v:.4g}{unit}" if abs(v) < 1000 else f"{v:,.0f}{unit}"


def _hover(rec: Mapping[str, Any]) -> str:
    return (
        f"<b>{rec['variant']}</b> ({rec['backend']})<br>{_shape_str(rec['shape'])}, {rec['dtype']}<br>"
        f"time {rec['time_ms']:.4g} ms (p20 {rec['p20_ms']:.4g}, p80 {rec['p80_ms']:.4g})<br>"
        f"{_fmt(rec['tflops'], ' TFLOP/s')} · {_fmt(rec['gbps'], ' GB/s')}<br>"
        f"{_fmt(rec['pct_peak'], '%')} of peak ({rec['bound'] or 'bound n/a'})<br>"
        f"{rec['device']['name']}, {rec['date'][:10]}"
    )


def _finish(
    fig: go.Figure,
    title: str,
    notes: Sequence[str],
    empty_msg: str | None,
    *,
    empty_at_bottom: bool = False,
) -> go.Figure:
    """Apply the common layout: title, notes under the plot, and the 'none recorded' message."""
    annotations = list(fig.layout.annotations or [])
    if empty_msg:
        annotations.append(
            dict(
                text=empty_msg,
                xref="paper", yref="paper",
                x=0.98 if empty_at_bottom else 0.5, y=0.04 if empty_at_bottom else 0.5,
                xanchor="right" if empty_at_bottom else "center",
                yanchor="bottom" if empty_at_bottom else "middle",
                showarrow=False, align="left" if empty_at_bottom else "center",
                font=dict(size=12 if empty_at_bottom else 14, color="#7a4b00"),
                bgcolor="rgba(255, 243, 205, 0.92)", bordercolor="#e0b44c", borderwidth=1, borderpad=6,
                name="none-recorded",
            )
        )
    if notes:
        annotations.append(
            dict(
                text="<br>".join(notes), xref="paper", yref="paper", x=0, y=-0.16,
                xanchor="left", yanchor="top", showarrow=False, align="left",
                font=dict(size=11, color="#555555"), name="notes",
            )
        )
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=15)),
        template="plotly_white",
        height=_HEIGHT + 18 * len(notes),
        margin=dict(l=70, r=20, t=60, b=70 + 18 * len(notes)),
        legend=dict(groupclick="toggleitem", font=dict(size=11)),
        hoverlabel=dict(font_size=11),
        annotations=annotations,
    )
    return fig


def _drop_empty(fig: go.Figure) -> go.Figure:
    fig.data = [t for t in fig.data if t.x is not None and len(t.x) > 0]
    return fig


# ---------------------------------------------------------------------------------------------------------
# throughput and bars


def _throughput(
    records: Sequence[Mapping[str, Any]],
    notes: list[str],
    metric: str,
    *,
    x_of: Callable[[Mapping[str, Any]], float | None],
    xlabel: str,
    title: str | None,
    op: str | None,
    slots: Sequence[str] | None = None,
    marker_x: float | None = None,
) -> go.Figure:
    unit = _UNITS[metric]
    usable = [r for r in records if r[metric] is not None and x_of(r) is not None]
    if len(usable) < len(records):
        notes = notes + [f"{len(records) - len(usable)} record(s) without {unit} or size not drawn."]
    multi_dtype = len({r["dtype"] for r in usable}) > 1
    multi_dev = len({r["device"]["name"] for r in usable}) > 1
    series: dict[str, list[Mapping[str, Any]]] = {name: [] for name in (slots or [])}
    for r in usable:
        key = r["variant"] if slots is not None else _series_key(r, multi_dtype, multi_dev)
        series.setdefault(key, []).append(r)
    fig = go.Figure()
    for key, recs in series.items():
        recs = sorted(recs, key=lambda r: x_of(r))
        ys = [r[metric] for r in recs]
        # p20/p80 times give the spread of the metric (shorter time = higher throughput)
        hi = [r[metric] * r["time_ms"] / r["p20_ms"] - r[metric] for r in recs]
        lo = [r[metric] - r[metric] * r["time_ms"] / r["p80_ms"] for r in recs]
        color = variant_color(recs[0]["variant"] if recs else key)
        fig.add_trace(
            go.Scatter(
                x=[x_of(r) for r in recs], y=ys, name=key, mode="lines+markers",
                line=dict(color=color, width=2), marker=dict(color=color, size=7),
                error_y=dict(type="data", array=hi, arrayminus=lo, visible=True, thickness=1, width=3),
                hovertext=[_hover(r) for r in recs], hoverinfo="text",
                visible=bool(recs) if slots is not None else True,
            )
        )
    xs = [x_of(r) for r in usable]
    numeric = all(isinstance(x, (int, float)) for x in xs)
    log_x = numeric and _spread(xs) >= 8
    fig.update_xaxes(title_text=xlabel, type="log" if log_x else None)
    ticks = sorted(set(xs)) if numeric else []
    if log_x and len(ticks) <= 12:  # label the measured sizes themselves (e.g. powers of two)
        fig.update_xaxes(tickvals=ticks, ticktext=[f"{v:g}" if v < 1e6 else f"{v:.3g}" for v in ticks])
    fig.update_yaxes(
        title_text=unit, type="log" if _spread([r[metric] for r in usable]) >= 30 else None, rangemode="tozero"
    )
    if marker_x is not None:
        fig.add_vline(x=marker_x, line=dict(color="#888", dash="dot", width=1))
    what = op or (usable[0]["op"] if usable else "")
    head = title or f"{what} throughput ({unit}) vs size".strip()
    prov = _provenance(usable) if usable else "no real-GPU measurements"
    _finish(fig, f"{head}<br><sup>{prov}</sup>", notes, None if usable else _none_recorded(op))
    if not usable:
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
    return fig if slots is not None else _drop_empty(fig)


def throughput_vs_size(
    records: Iterable[Mapping[str, Any]] | None,
    metric: str = "tflops",
    size_key: str | None = None,
    title: str | None = None,
    *,
    op: str | None = None,
) -> go.Figure:
    """Plot throughput against problem size, one line per variant, from real-GPU records.

    ``metric`` is "tflops" or "gbps". The x axis is ``shape[size_key]``; by default the one shape key that
    varies across the records, else the product of all dims. Axes turn logarithmic when values span a wide
    range. Error bars show the p20-p80 spread. The subtitle names the GPU(s) and date(s) of the records.
    With no real records the figure says none are recorded (``op`` names the op in that message); emulated
    records are excluded with a note.
    """
    _check_metric(metric)
    real, notes = _prepare(records)
    op = op or (real[0]["op"] if real else None)
    key, label = _pick_size_key(real, size_key)
    return _throughput(real, notes, metric, x_of=lambda r: _size(r, key), xlabel=label, title=title, op=op)


def compare_variants(
    records: Iterable[Mapping[str, Any]] | None,
    metric: str = "tflops",
    *,
    dtype: Any = None,
    shape: Mapping[str, int] | None = None,
    op: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Plot one bar per variant at one shape (default: the largest shape every variant has), with % of peak.

    Only one dtype is compared (``dtype``, default the most common). The datasheet peak of the bound
    resource is drawn as a dashed line when the GPU has a datasheet entry. With no real records the figure
    says none are recorded; emulated records are excluded with a note.
    """
    _check_metric(metric)
    unit = _UNITS[metric]
    real, notes = _prepare(records)
    op = op or (real[0]["op"] if real else None)
    if real:
        want = hardware.canonical_dtype(dtype) if dtype is not None else Counter(
            r["dtype"] for r in real
        ).most_common(1)[0][0]
        others = [r for r in real if r["dtype"] != want]
        if others:
            notes.append(f"{len(others)} record(s) of other dtypes not shown (comparing {want}).")
        real = [r for r in real if r["dtype"] == want and r[metric] is not None]
    by_variant: dict[str, list[Mapping[str, Any]]] = {}
    for r in real:
        by_variant.setdefault(r["variant"], []).append(r)
    chosen: dict[str, Mapping[str, Any]] = {}
    shape_note = ""
    if shape is not None:
        for v, recs in by_variant.items():
            hit = [r for r in recs if dict(r["shape"]) == dict(shape)]
            if hit:
                chosen[v] = min(hit, key=lambda r: r["time_ms"])
        shape_note = _shape_str(shape)
    elif by_variant:
        shapes = [{tuple(r["shape"].items()) for r in recs} for recs in by_variant.values()]
        common = set.intersection(*shapes)
        if common:
            best = max(common, key=lambda s: math.prod(v for _, v in s))
            for v, recs in by_variant.items():
                chosen[v] = min((r for r in recs if tuple(r["shape"].items()) == best), key=lambda r: r["time_ms"])
            shape_note = _shape_str(dict(best))
        else:
            for v, recs in by_variant.items():
                chosen[v] = max(recs, key=lambda r: (math.prod(r["shape"].values()), -r["time_ms"]))
            shape_note = "each variant at its largest shape"
            notes.append("No shape is shared by all variants: each bar is that variant's largest shape.")
    fig = go.Figure()
    for v, r in chosen.items():
        fig.add_trace(
            go.Bar(
                x=[v], y=[r[metric]], name=v, marker_color=variant_color(v),
                text=[_fmt(r["pct_peak"], "% of peak") if r["pct_peak"] is not None else ""],
                textposition="outside", hovertext=[_hover(r)], hoverinfo="text",
            )
        )
    spec = hardware.lookup(next(iter(chosen.values()))["device"]["name"]) if chosen else None
    if spec is not None:
        try:
            if metric == "tflops":
                peak = hardware.peak_tflops(spec, next(iter(chosen.values()))["dtype"])
            else:
                peak = float(spec.bandwidth_gbs)
            top = max(r[metric] for r in chosen.values())
            if top < 0.1 * peak:
                notes.append(
                    f"Datasheet peak {_fmt(peak)} {unit} ({spec.name}) not drawn: every bar is below 10% of it."
                )
                raise _SkipPeak
            fig.add_hline(
                y=peak, line=dict(color=_ROOF, dash="dash", width=1),
                annotation_text=f"datasheet peak {_fmt(peak)} {unit} ({spec.name})",
                annotation_position="top left", annotation_font_size=11,
            )
        except ValueError as e:
            notes.append(str(e))
        except _SkipPeak:
            pass
    fig.update_yaxes(title_text=unit, rangemode="tozero")
    fig.update_xaxes(title_text="variant")
    head = title or f"{op or ''} variants compared ({unit})".strip()
    sub = f"{shape_note}, {_provenance(list(chosen.values()))}" if chosen else "no real-GPU measurements"
    _finish(fig, f"{head}<br><sup>{sub}</sup>", notes, None if chosen else _none_recorded(op))
    fig.update_layout(showlegend=False, bargap=0.35)
    if not chosen:
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
    return fig


# ---------------------------------------------------------------------------------------------------------
# roofline


def _resolve_device(device: Any, records: Sequence[Mapping[str, Any]], notes: list[str]) -> Any:
    """Return (spec or None, how it was chosen)."""
    if device is not None:
        spec = hardware.lookup(device)
        if spec is None:
            notes.append(hardware.describe_unknown(str(device)))
        return spec
    if records:
        name = records[0]["device"]["name"]
        spec = hardware.lookup(name)
        if spec is None:
            notes.append(hardware.describe_unknown(name))
        return spec
    spec = hardware.current_device()
    if spec is None:
        spec = hardware.DEVICES[hardware.DEFAULT_DEVICE]
        notes.append(
            f"No GPU here: ceilings are the datasheet of {spec.name}, the project's reference GPU."
        )
    return spec


def _roofline(
    records: Sequence[Mapping[str, Any]],
    notes: list[str],
    spec: hardware.DeviceSpec | None,
    dtype: str,
    points: Sequence[Mapping[str, Any]],
    *,
    tf32: bool,
    op: str | None,
    title: str | None,
    slots: Sequence[str] | None = None,
) -> go.Figure:
    peak = bw = None
    if spec is not None:
        bw = float(spec.bandwidth_gbs)
        try:
            peak = hardware.peak_tflops(spec, dtype, tf32=tf32)
        except ValueError as e:
            notes = notes + [str(e)]
    ridge = peak * 1e3 / bw if peak and bw else None

    meas = [r for r in records if r["tflops"] is not None and r["bytes"] > 0 and r["flops"] > 0]
    if len(meas) < len(records):
        notes = notes + [f"{len(records) - len(meas)} record(s) without FLOPs or bytes not drawn."]

    pts = []
    for p in points:
        if p.get("predicted", True) is not True:
            raise ValueError(
                f"point {p.get('label')!r}: roofline points are napkin-math predictions (predicted=True); "
                "pass measurements as records"
            )
        if "label" not in p or "intensity" not in p:
            raise ValueError(f"a point needs 'label' and 'intensity' (FLOP/byte), got keys {sorted(p)}")
        inten = float(p["intensity"])
        if not inten > 0:
            raise ValueError(f"point {p['label']!r}: intensity must be > 0 FLOP/byte, got {p['intensity']!r}")
        y = p.get("tflops")
        if y is None:
            if bw is None:
                notes = notes + [f"point {p['label']!r} not drawn: no datasheet entry to bound it."]
                continue
            y = min(peak, bw * inten / 1e3) if peak else bw * inten / 1e3
        pts.append({**p, "intensity": inten, "tflops": float(y)})

    xs = [r["flops"] / r["bytes"] for r in meas] + [p["intensity"] for p in pts]
    anchors = xs + ([ridge] if ridge else [])
    lo_x = min([*anchors, (ridge or 1.0) / 100]) / 3
    hi_x = max([*anchors, (ridge or 1.0) * 10]) * 3
    lo_x, hi_x = 10 ** math.floor(math.log10(lo_x)), 10 ** math.ceil(math.log10(hi_x))

    fig = go.Figure()
    keep = slots is not None

    def add(trace: go.Scatter) -> None:
        if keep or (trace.x is not None and len(trace.x) > 0):
            if keep:
                trace.visible = trace.x is not None and len(trace.x) > 0
            fig.add_trace(trace)

    dname = hardware.canonical_dtype(dtype) + (" (tf32)" if tf32 else "")
    # datasheet roof
    if bw is not None:
        if peak:
            rx, ry = [lo_x, ridge, hi_x], [bw * lo_x / 1e3, peak, peak]
            name = f"datasheet roof: {_fmt(bw)} GB/s, {dname} {_fmt(peak)} TFLOP/s"
        else:
            rx, ry = [lo_x, hi_x], [bw * lo_x / 1e3, bw * hi_x / 1e3]
            name = f"datasheet memory roof: {_fmt(bw)} GB/s"
        add(go.Scatter(x=rx, y=ry, mode="lines", name=name, line=dict(color=_ROOF, width=3),
                       hoverinfo="name", legendgroup="ceilings", legendgrouptitle_text="ceilings"))
    else:
        add(go.Scatter(x=[], y=[], name="datasheet roof", legendgroup="ceilings"))
    # fp32 SIMT ceiling for context
    ctx = None
    if spec is not None and (hardware.canonical_dtype(dtype) != "float32" or tf32):
        ctx = float(spec.fp32_tflops)
    if ctx and bw:
        add(go.Scatter(x=[ctx * 1e3 / bw, hi_x], y=[ctx, ctx], mode="lines",
                       name=f"fp32 SIMT {_fmt(ctx)} TFLOP/s (context)",
                       line=dict(color=_CONTEXT, width=2, dash="dot"), hoverinfo="name",
                       legendgroup="ceilings", legendgrouptitle_text="ceilings"))
    else:
        add(go.Scatter(x=[], y=[], name="fp32 SIMT (context)", legendgroup="ceilings"))
    # measured ceilings
    mbw = spec.measured_bandwidth_gbs if spec is not None else None
    mpk = hardware.measured_tflops(spec, dtype) if spec is not None and not tf32 else None
    top = mpk or peak
    if mbw:
        end = top * 1e3 / mbw if top else hi_x
        add(go.Scatter(x=[lo_x, end], y=[mbw * lo_x / 1e3, mbw * end / 1e3], mode="lines",
                       name=f"measured copy bandwidth {_fmt(mbw)} GB/s",
                       line=dict(color=_MEASURED_CEIL, width=1.5, dash="dash"), hoverinfo="name",
                       legendgroup="ceilings", legendgrouptitle_text="ceilings"))
    else:
        add(go.Scatter(x=[], y=[], name="measured bandwidth", legendgroup="ceilings"))
    if mpk:
        start = mpk * 1e3 / (mbw or bw)
        add(go.Scatter(x=[start, hi_x], y=[mpk, mpk], mode="lines",
                       name=f"measured {dname} matmul {_fmt(mpk)} TFLOP/s",
                       line=dict(color=_MEASURED_CEIL, width=1.5, dash="dash"), hoverinfo="name",
                       legendgroup="ceilings", legendgrouptitle_text="ceilings"))
    else:
        add(go.Scatter(x=[], y=[], name="measured compute", legendgroup="ceilings"))

    # measurements and predictions, per variant
    names = list(slots) if slots is not None else []
    for r in meas:
        if r["variant"] not in names:
            names.append(r["variant"])
    for p in pts:
        if p["label"] not in names and slots is None:
            names.append(p["label"])
    for name in names:
        mine = [r for r in meas if r["variant"] == name]
        add(go.Scatter(
            x=[r["flops"] / r["bytes"] for r in mine], y=[r["tflops"] for r in mine], mode="markers",
            name=f"{name} (measured)", marker=dict(color=variant_color(name), size=11, symbol="circle",
                                                  line=dict(color="white", width=1)),
            hovertext=[_hover(r) + f"<br>intensity {r['flops'] / r['bytes']:.3g} FLOP/B" for r in mine],
            hoverinfo="text", legendgroup="measured", legendgrouptitle_text="measured on GPU",
        ))
    for name in names:
        mine = [p for p in pts if p["label"] == name]
        add(go.Scatter(
            x=[p["intensity"] for p in mine], y=[p["tflops"] for p in mine], mode="markers+text",
            name=f"{name} (predicted)", text=[name for _ in mine], textposition="top center",
            textfont=dict(size=10, color=variant_color(name)),
            marker=dict(color=variant_color(name), size=14, symbol="diamond-open", line=dict(width=2.5)),
            hovertext=[
                f"<b>{p['label']}</b> (predicted, napkin math)<br>intensity {p['intensity']:.3g} FLOP/B<br>"
                f"attainable {_fmt(p['tflops'])} TFLOP/s"
                + (f" ({'memory' if ridge and p['intensity'] < ridge else 'compute'}-bound)" if ridge else "")
                + (f"<br>{p['note']}" if p.get("note") else "")
                for p in mine
            ],
            hoverinfo="text", legendgroup="predicted", legendgrouptitle_text="predicted (napkin math)",
        ))
    # a second pass of points whose labels are not slot names (explorer only draws slot names)
    if slots is not None:
        extra = [p for p in pts if p["label"] not in names]
        if extra:
            notes = notes + [f"{len(extra)} predicted point(s) with unknown labels not drawn."]

    ys = [r["tflops"] for r in meas] + [p["tflops"] for p in pts]
    if bw:
        ys.append(bw * lo_x / 1e3)
    y_hi = max([*(ys or [1.0]), peak or 0.0]) * 2.5
    y_lo = max(min(ys or [1e-3]) / 2.5, y_hi / 1e7)
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte of DRAM traffic)",
                     range=[math.log10(lo_x), math.log10(hi_x)], exponentformat="power", showgrid=True)
    fig.update_yaxes(type="log", title_text="TFLOP/s", range=[math.log10(y_lo), math.log10(y_hi)],
                     exponentformat="power", showgrid=True)
    if ridge:
        fig.add_annotation(x=math.log10(ridge), y=math.log10(peak), text=f"ridge {ridge:.0f} FLOP/B",
                           showarrow=True, arrowhead=2, ax=40, ay=30, font=dict(size=11, color=_ROOF))
    what = op or (meas[0]["op"] if meas else "")
    head = title or f"Roofline{': ' + what if what else ''}, {dname} on {spec.name if spec else 'unknown GPU'}"
    sub = _provenance(meas) if meas else "datasheet ceilings (dense); no measurements drawn"
    fig = _finish(fig, f"{head}<br><sup>{sub}</sup>", notes, None if meas else _none_recorded(op),
                  empty_at_bottom=True)
    fig.update_layout(legend=dict(tracegroupgap=8))
    return fig


def roofline(
    records: Iterable[Mapping[str, Any]] | None = None,
    device: hardware.DeviceSpec | str | None = None,
    dtype: Any = None,
    points: Sequence[Mapping[str, Any]] | None = None,
    *,
    tf32: bool = False,
    op: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Plot a log-log roofline: TFLOP/s against arithmetic intensity (FLOP/byte), with records and predictions.

    Ceilings: the datasheet memory roof and the dtype's dense peak (solid), fp32 SIMT for context (dotted),
    and measured bandwidth / matmul ceilings where recorded (dashed). ``device`` defaults to the records'
    GPU, else the current GPU, else the project's reference H200 (said in a note); a GPU with no datasheet
    entry gets a note listing the known ones. ``dtype`` defaults to the records' most common dtype, else
    float32 (SIMT; ``tf32=True`` for TF32 tensor cores); records of other dtypes are left out with a note.
    ``points`` are napkin-math predictions ``{"label", "intensity", "tflops": None, "predicted": True}``,
    drawn at the attainable bound min(peak, bandwidth x intensity) unless tflops is given, as open diamonds
    in their own "predicted (napkin math)" legend group. Emulated records are excluded with a note.
    """
    real, notes = _prepare(records)
    if dtype is None:
        dtype = Counter(r["dtype"] for r in real).most_common(1)[0][0] if real else "float32"
    want = hardware.canonical_dtype(dtype)
    others = [r for r in real if r["dtype"] != want]
    if others:
        notes.append(f"{len(others)} record(s) of other dtypes not shown (this roofline is {want}).")
    real = [r for r in real if r["dtype"] == want]
    spec = _resolve_device(device, real, notes)
    return _roofline(real, notes, spec, want, list(points or []), tf32=tf32, op=op, title=title)


def save_html(fig: go.Figure, path: str | Path) -> Path:
    """Write ``fig`` as a standalone HTML page (plotly.js embedded, works offline) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(path), include_plotlyjs=True, full_html=True)
    return path


# ---------------------------------------------------------------------------------------------------------
# explorer


def _sync(widget: go.FigureWidget, fig: go.Figure) -> None:
    """Copy ``fig``'s traces and layout into ``widget`` in place (same trace structure)."""
    if len(widget.data) != len(fig.data):
        raise RuntimeError(f"trace structure changed: {len(widget.data)} vs {len(fig.data)} traces")
    with widget.batch_update():
        for old, new in zip(widget.data, fig.data, strict=True):
            props = new.to_plotly_json()
            props.pop("type", None)
            props.pop("uid", None)
            for k in ("x", "y", "hovertext", "text", "name", "visible"):
                props.setdefault(k, None)
            old.update(props, overwrite=True)
        widget.layout.annotations = fig.layout.annotations
        widget.layout.shapes = fig.layout.shapes
        widget.layout.title = fig.layout.title
        widget.layout.xaxis = fig.layout.xaxis
        widget.layout.yaxis = fig.layout.yaxis
        widget.layout.height = fig.layout.height
        widget.layout.margin = fig.layout.margin


def _call_count(fn: Any, shape: Mapping[str, int], dtype: Any) -> float | None:
    if not callable(fn):
        return None
    out = fn(**shape, dtype=dtype)
    return None if out is None else float(out)


def explorer(
    op: str,
    variants: Sequence[Any],
    flops_fn: Callable[..., float] | None,
    bytes_fn: Callable[..., float] | None,
    sizes: Sequence[Any],
    dtypes: Sequence[Any],
    shape_fn: Callable[[Any], Mapping[str, int]],
    records: Iterable[Mapping[str, Any]] | None = None,
    device: hardware.DeviceSpec | str | None = None,
    *,
    metric: str = "tflops",
) -> Any:
    """Build an interactive roofline + throughput explorer for one op; return an ``ipywidgets.VBox``.

    Controls: a variant multi-select, a dtype dropdown and a size slider (over ``sizes``). Figure (a) is the
    roofline at the chosen size and dtype with each selected variant's predicted point (intensity =
    flops/bytes of ``shape_fn(size)``, from the variant's own ``.flops``/``.bytes``, else ``flops_fn`` /
    ``bytes_fn``) and any recorded GPU measurements at that size and dtype. Figure (b) is recorded throughput
    (``metric``) against size for the selected variants, or the "none recorded" message. Changing a control
    updates both FigureWidgets in place. ``records=None`` loads ``results/`` for ``op``; emulated records are
    excluded with a note. ``variants`` need ``.name``, ``.backend``, ``.idea``, ``.flops(**shape, dtype=)``
    and ``.bytes(**shape, dtype=)``. The returned box exposes ``variant_select``, ``dtype_dropdown``,
    ``size_slider``, ``figures`` (roofline, throughput), ``roofline_figure``, ``throughput_figure``, ``info``
    and ``refresh()``.
    """
    import ipywidgets as widgets

    from workbench.results import load_recorded

    _check_metric(metric)
    if not variants:
        raise ValueError(f"explorer({op!r}): expected at least one variant")
    if not sizes or not dtypes:
        raise ValueError(f"explorer({op!r}): expected non-empty sizes and dtypes, got {sizes!r} / {dtypes!r}")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"explorer({op!r}): variant names must be unique, got {names}")
    by_name = {v.name: v for v in variants}
    for n in names:
        variant_color(n)
    if records is None:
        records = load_recorded(op)
    real, base_notes = _prepare(records)
    real = [r for r in real if r["op"] == op] if real else real
    shape_to_size = {tuple(sorted(dict(shape_fn(s)).items())): s for s in sizes}

    def size_of(rec: Mapping[str, Any]) -> Any:
        return shape_to_size.get(tuple(sorted(rec["shape"].items())))

    variant_select = widgets.SelectMultiple(
        options=names, value=tuple(names), rows=min(max(len(names), 2), 8), description="variants",
        layout=widgets.Layout(width="340px"),
    )
    dtype_dropdown = widgets.Dropdown(
        options=[(hardware.canonical_dtype(d), d) for d in dtypes], value=dtypes[0], description="dtype",
    )
    size_slider = widgets.SelectionSlider(
        options=list(sizes), value=list(sizes)[len(sizes) // 2], description="size",
        continuous_update=False, layout=widgets.Layout(width="420px"),
    )
    info = widgets.HTML()

    def build() -> tuple[go.Figure, go.Figure, str]:
        dtype = dtype_dropdown.value
        dname = hardware.canonical_dtype(dtype)
        size = size_slider.value
        shape = dict(shape_fn(size))
        chosen = list(variant_select.value)
        notes = list(base_notes)
        here = [r for r in real if r["dtype"] == dname and r["variant"] in chosen]
        spec = _resolve_device(device, here or real, notes)
        points, rows = [], []
        for n in chosen:
            v = by_name[n]
            fl = _call_count(getattr(v, "flops", None), shape, dtype)
            by = _call_count(getattr(v, "bytes", None), shape, dtype)
            fl = fl if fl is not None else _call_count(flops_fn, shape, dtype)
            by = by if by is not None else _call_count(bytes_fn, shape, dtype)
            if not fl or not by:
                notes.append(f"{n}: no FLOP or byte count at {_shape_str(shape)}, so no prediction.")
                continue
            note = ""
            if spec is not None:
                try:
                    t_c = fl / (hardware.peak_tflops(spec, dtype) * 1e12)
                except ValueError:
                    t_c = 0.0
                t_m = by / (spec.bandwidth_gbs * 1e9)
                note = f"napkin time ≈ {max(t_c, t_m) * 1e6:.3g} µs"
            points.append({"label": n, "intensity": fl / by, "predicted": True, "note": note})
            rows.append(
                f"<tr><td><b style='color:{variant_color(n)}'>{n}</b></td><td>{v.backend}</td>"
                f"<td>{fl:.3g}</td><td>{by:.3g}</td><td>{fl / by:.3g}</td><td>{note}</td>"
                f"<td>{getattr(v, 'idea', '')}</td></tr>"
            )
        at_size = [r for r in here if dict(r["shape"]) == shape]
        roof = _roofline(at_size, notes, spec, dname, points, tf32=False, op=op, title=None, slots=names)
        sized = [r for r in here if size_of(r) is not None]
        thr = _throughput(
            sized, list(base_notes), metric, x_of=size_of, xlabel="size", title=None, op=op,
            slots=names, marker_x=size if isinstance(size, (int, float)) else None,
        )
        table = (
            f"<b>{op}</b> at size {size} ({_shape_str(shape)}), {dname}"
            "<table style='font-size:12px'><tr><th>variant</th><th>backend</th><th>FLOPs</th><th>bytes</th>"
            "<th>FLOP/B</th><th>prediction</th><th>idea</th></tr>" + "".join(rows) + "</table>"
        )
        return roof, thr, table

    roof0, thr0, table0 = build()
    roof_fig = go.FigureWidget(roof0)
    thr_fig = go.FigureWidget(thr0)
    info.value = table0

    def refresh(*_: Any) -> None:
        roof, thr, table = build()
        _sync(roof_fig, roof)
        _sync(thr_fig, thr)
        info.value = table

    for w in (variant_select, dtype_dropdown, size_slider):
        w.observe(refresh, names="value")

    controls = widgets.HBox([variant_select, widgets.VBox([dtype_dropdown, size_slider])])
    box = widgets.VBox([controls, info, roof_fig, thr_fig])
    box.variant_select = variant_select
    box.dtype_dropdown = dtype_dropdown
    box.size_slider = size_slider
    box.roofline_figure = roof_fig
    box.throughput_figure = thr_fig
    box.figures = (roof_fig, thr_fig)
    box.info = info
    box.refresh = refresh
    return box
