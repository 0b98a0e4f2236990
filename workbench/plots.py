"""Draw benchmark results and napkin-math predictions: throughput, variant bars, rooflines, and an explorer.

Figures take records in the format of :mod:`workbench.results`. Only real-GPU measurements are drawn as
performance: emulated records are excluded with a visible note, and a figure with no real records says so
("No real-GPU results recorded yet for <op> ..."). Predictions (napkin math) are drawn in their own legend
group with open markers, never styled as measurements. Without GPU records a figure is still not empty when it is
given ``counted=`` (:func:`workbench.counters_table` results): :func:`traffic_model` turns the emulators' exact byte
counts into the time they need at the measured copy bandwidth (and the FLOPs at the datasheet peak), drawn in a legend
group labelled "model from emulated counters, not a measurement". Each variant keeps one colour across all figures
of the session (:func:`variant_color`).
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

from workbench import hardware
from workbench.plot_labels import point_labels
from workbench.results import validate_record

__all__ = [
    "MODEL_LABEL",
    "compare_variants",
    "roofline",
    "save_html",
    "throughput_vs_size",
    "traffic_model",
    "variant_color",
]

_UNITS = {"tflops": "TFLOP/s", "gbps": "GB/s"}
_PALETTE = list(qualitative.D3) + list(qualitative.Dark24)
_COLORS: dict[str, str] = {}
_ROOF = "#222222"
_CONTEXT = "#9a9a9a"
_MEASURED_CEIL = "#c0392b"
_HEIGHT = 470


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
    return f"No real-GPU results recorded yet for {name}.<br>On a GPU machine, run<br>`python -m workbench bench{flag}`"


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


# Readable at JupyterLab's default width (a 1280 px window with the file browser open gives a figure ~850 px
# wide) and narrower: long texts are wrapped to these many characters.
_TITLE_CHARS, _SUB_CHARS, _NOTE_CHARS = 70, 100, 100


def _wrap(text: str, width: int) -> list[str]:
    """Split plain ``text`` (its own ``<br>`` kept) into lines of at most ``width`` characters, at spaces."""
    lines = []
    for part in text.split("<br>"):
        lines += textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False) or [""]
    return lines


def _finish(
    fig: go.Figure,
    head: str,
    sub: str,
    notes: Sequence[str],
    empty_msg: str | None,
    *,
    empty_at_bottom: bool = False,
) -> go.Figure:
    """Apply the common layout: title and subtitle, notes under the plot, and the 'none recorded' message.

    Titles, notes and the message are wrapped so that none runs past the figure's edges at JupyterLab's
    default width; the margins and height grow with their line counts.
    """
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
                font=dict(size=12, color="#7a4b00"),
                bgcolor="rgba(255, 243, 205, 0.92)", bordercolor="#e0b44c", borderwidth=1, borderpad=6,
                name="none-recorded",
            )
        )
    note_lines = [line for n in notes for line in _wrap(n, _NOTE_CHARS)]
    if note_lines:  # below the x axis title, whatever the plot's height
        annotations.append(
            dict(
                text="<br>".join(note_lines), xref="paper", yref="paper", x=0, y=0, yshift=-50,
                xanchor="left", yanchor="top", showarrow=False, align="left",
                font=dict(size=11, color="#555555"), name="notes",
            )
        )
    heads, subs = _wrap(head, _TITLE_CHARS), _wrap(sub, _SUB_CHARS) if sub else []
    title = "<br>".join(heads + [f"<sup>{line}</sup>" for line in subs])
    top = 30 + 20 * len(heads) + 14 * len(subs)
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", yref="container", y=1, yanchor="top",
                   pad=dict(t=16), font=dict(size=15)),
        template="plotly_white",
        height=_HEIGHT + top - 60 + 15 * len(note_lines),
        margin=dict(l=70, r=20, t=top, b=70 + 15 * len(note_lines)),
        legend=dict(groupclick="toggleitem", font=dict(size=11)),
        hoverlabel=dict(font_size=11),
        annotations=annotations,
    )
    return fig


def _drop_empty(fig: go.Figure) -> go.Figure:
    fig.data = [t for t in fig.data if t.x is not None and len(t.x) > 0]
    return fig


# ---------------------------------------------------------------------------------------------------------
# traffic model: what the emulators' exact counts imply on a GPU, drawn beside (never as) measurements

MODEL_LABEL = "model from emulated counters, not a measurement"
_MODEL_COLOR_ALPHA = 0.45


def _model_scope(backends: str) -> str:
    """Return what the counted bytes are, for the model's label: sectors of L1 requests or Triton's bytes."""
    kinds = {b.strip() for b in backends.split(",") if b.strip()}
    if kinds and kinds <= {"cuda", "numba"}:  # both emulators count the sectors of L1-level requests
        return "L1-level requests only"
    if kinds and kinds <= {"triton"}:
        return "bytes Triton's unmasked lanes request"
    return "L1-level requests (CUDA C), bytes requested (Triton)"


def _model_ceilings(spec: hardware.DeviceSpec, dtype: str) -> tuple[float, str, float | None]:
    """Return (bandwidth GB/s and what it is, dense peak TFLOP/s or None) for the traffic model on ``spec``."""
    mbw = spec.measured_bandwidth_gbs
    bw_what = (f"measured copy bandwidth {_fmt(mbw)} GB/s" if mbw
               else f"datasheet bandwidth {_fmt(spec.bandwidth_gbs)} GB/s (no measured copy bandwidth recorded)")
    try:
        peak: float | None = hardware.peak_tflops(spec, dtype)
    except ValueError:
        peak = None
    return float(mbw or spec.bandwidth_gbs), bw_what, peak


def traffic_model(counted: Any, device: hardware.DeviceSpec | str | None = None) -> list[dict[str, Any]]:
    """Return one modelled point per counted variant: time >= counted bytes / copy bandwidth, >= FLOPs / peak.

    Each point is drawn as a measurement of the same call would be: at the op's intensity (FLOPs / compulsory
    bytes), with ``tflops`` = FLOPs / time and ``gbps`` = compulsory bytes / time, so a variant that moves 8x the
    compulsory bytes sits 8x below the memory roof.

    ``counted``: a :func:`workbench.counters_table` result, or several (one per problem size). The bytes are the
    emulators' exact global traffic (CUDA C: 32-byte sectors of L1-level requests, nothing assumed cached;
    Triton: bytes its unmasked lanes request); the FLOPs are the op's. The bandwidth is the device's measured
    copy bandwidth (its datasheet value where none is recorded), the peak the dtype's dense datasheet peak,
    both from :mod:`workbench.hardware`. ``device`` defaults to this GPU, else the reference H200. Rows the
    emulators could not count are left out. Each point says it is a model (``"model": MODEL_LABEL``).
    """
    tables = [counted] if hasattr(counted, "rows") else list(counted)
    if isinstance(device, hardware.DeviceSpec):
        spec: hardware.DeviceSpec | None = device
    elif device is not None:
        spec = hardware.lookup(device)
    else:
        spec = hardware.current_device() or hardware.DEVICES[hardware.DEFAULT_DEVICE]
    if spec is None:
        raise ValueError(hardware.describe_unknown(str(device)))
    out = []
    for t in tables:
        dtype = hardware.canonical_dtype(t.dtype)
        bw, bw_what, peak = _model_ceilings(spec, dtype)
        flops = t.flops()
        for row in t.rows:
            if not row.global_bytes:
                continue
            t_mem = row.global_bytes / (bw * 1e9)
            t_cmp = flops / (peak * 1e12) if peak else 0.0
            time_s = max(t_mem, t_cmp)
            out.append({
                "label": row.label, "op": t.op, "shape": dict(t.shape), "dtype": dtype, "flops": flops,
                "bytes": float(row.global_bytes), "compulsory_bytes": t.compulsory_bytes,
                "intensity": flops / t.compulsory_bytes if flops and t.compulsory_bytes else None,
                "time_s": time_s, "tflops": flops / time_s / 1e12, "gbps": t.compulsory_bytes / time_s / 1e9,
                "bound": "compute" if t_cmp > t_mem else "memory", "scope": _model_scope(row.backends),
                "device": spec.name, "bandwidth": bw_what, "peak_tflops": peak, "model": MODEL_LABEL,
            })
    return out


def _model_for(counted: Any, records: Sequence[Mapping[str, Any]], device: Any,
               notes: list[str]) -> list[dict[str, Any]]:
    """Return the traffic model of ``counted`` on the records' GPU (else ``device``, this GPU or the H200)."""
    if counted is None:
        return []
    spec = _resolve_device(device, records, notes)
    return traffic_model(counted, spec) if spec is not None else []


def _banner_or_note(notes: list[str], op: str | None, measured: bool,
                    modelled: bool) -> tuple[list[str], str | None]:
    """Return (notes, banner): the 'none recorded' banner over an empty plot, a first note beside a model."""
    if measured:
        return notes, None
    if modelled:
        flag = f" --op {op}" if op else ""
        return [f"No real-GPU results recorded yet for {op or 'this op'}: on a GPU machine, run "
                f"`python -m workbench bench{flag}`."] + notes, None
    return notes, _none_recorded(op)


def _model_hover(p: Mapping[str, Any]) -> str:
    peak = f", {p['dtype']} peak {_fmt(p['peak_tflops'])} TFLOP/s" if p["peak_tflops"] else ""
    return (f"<b>{p['label']}</b> ({MODEL_LABEL})<br>{_shape_str(p['shape'])}, {p['dtype']}<br>"
            f"counted bytes {p['bytes']:,.0f} ({p['scope']}): {p['bytes'] / p['compulsory_bytes']:.3g}x the "
            f"compulsory {p['compulsory_bytes']:,.0f}; FLOPs {p['flops']:.3g}<br>"
            f"time >= {p['time_s'] * 1e6:.3g} µs ({p['bound']}-bound) on {p['device']}: {p['bandwidth']}{peak}")


def _model_group(pts: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    scopes = sorted({p["scope"] for p in pts})
    # One line per scope: joined on one line, a mix of backends made the legend as wide as the plot.
    lines = "<br>".join(f"({s})" for s in scopes)
    return dict(legendgroup="model", legendgrouptitle_text=f"{MODEL_LABEL}<br>{lines}")


def _model_traces(pts: Sequence[Mapping[str, Any]], x: str, y: str, mode: str = "markers") -> list[go.Scatter]:
    """Return one trace per modelled variant (open squares, or a dotted line across sizes)."""
    out = []
    for name in dict.fromkeys(p["label"] for p in pts):
        mine = sorted((p for p in pts if p["label"] == name), key=lambda p: p[x] or 0)
        color = variant_color(name)
        out.append(go.Scatter(
            x=[p[x] for p in mine], y=[p[y] for p in mine], mode=mode, name=f"{name} (model)",
            marker=dict(color=color, size=12, symbol="square-open", line=dict(width=2)),
            line=dict(color=color, width=1.5, dash="dot"), hovertext=[_model_hover(p) for p in mine],
            hoverinfo="text", **_model_group(pts)))
    return out


def _model_bars(pts: Sequence[Mapping[str, Any]], metric: str) -> list[go.Bar]:
    """Return one hatched bar per modelled variant, its modelled time written above it."""
    return [go.Bar(
        x=[p["label"]], y=[p[metric]], name=f"{p['label']} (model)",
        marker=dict(color=variant_color(p["label"]), opacity=0.6, pattern=dict(shape="/")),
        text=[f"model: {p['time_s'] * 1e6:.3g} µs"], textposition="outside", hovertext=[_model_hover(p)],
        hoverinfo="text", **_model_group(pts)) for p in pts]


def _model_note(pts: Sequence[Mapping[str, Any]]) -> str:
    p = pts[0]
    peak = f" and >= FLOPs / the {p['dtype']} peak ({_fmt(p['peak_tflops'])} TFLOP/s)" if p["peak_tflops"] else ""
    return (f"Squares: {MODEL_LABEL}. Time >= counted bytes / the {p['bandwidth']} on {p['device']}{peak}; "
            "drawn as a measurement would be (the op's FLOPs and compulsory bytes over that time). The bytes are "
            "exact emulated counts; no cache behaviour is modelled.")


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
    model: Sequence[Mapping[str, Any]] = (),
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
    if model:
        fig.add_traces(_model_traces(model, "x", metric, mode="lines+markers"))
        notes = notes + [_model_note(model)]
    xs = [x_of(r) for r in usable] + [m["x"] for m in model]
    numeric = all(isinstance(x, (int, float)) for x in xs)
    log_x = numeric and _spread(xs) >= 8
    fig.update_xaxes(title_text=xlabel, type="log" if log_x else None)
    ticks = sorted(set(xs)) if numeric else []
    if log_x and len(ticks) <= 12:  # label the measured sizes themselves (e.g. powers of two)
        fig.update_xaxes(tickvals=ticks, ticktext=[f"{v:g}" if v < 1e6 else f"{v:.3g}" for v in ticks])
    fig.update_yaxes(
        title_text=unit, rangemode="tozero",
        type="log" if _spread([r[metric] for r in usable] + [m[metric] for m in model]) >= 30 else None,
    )
    if marker_x is not None:
        fig.add_vline(x=marker_x, line=dict(color="#888", dash="dot", width=1))
    what = op or (usable[0]["op"] if usable else "")
    head = title or f"{what} throughput ({unit}) vs size".strip()
    prov = _provenance(usable) if usable else "no real-GPU measurements"
    _finish(fig, head, prov, *_banner_or_note(notes, op, bool(usable), bool(model)))
    if not usable and not model:
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
    counted: Any = None,
    device: hardware.DeviceSpec | str | None = None,
) -> go.Figure:
    """Plot throughput against problem size, one line per variant, from real-GPU records.

    ``metric`` is "tflops" or "gbps". The x axis is ``shape[size_key]``; by default the one shape key that
    varies across the records, else the product of all dims. Axes turn logarithmic when values span a wide
    range. Error bars show the p20-p80 spread. The subtitle names the GPU(s) and date(s) of the records.
    With no real records the figure says none are recorded (``op`` names the op in that message); emulated
    records are excluded with a note. ``counted`` (:func:`workbench.counters_table` results, one per size) adds
    the :func:`traffic_model` of each variant as a dotted line labelled "model from emulated counters, not a
    measurement", on the records' GPU (else ``device``, this GPU or the reference H200).
    """
    _check_metric(metric)
    real, notes = _prepare(records)
    model = _model_for(counted, real, device, notes)
    op = op or (real[0]["op"] if real else model[0]["op"] if model else None)
    sized = real or [{"shape": m["shape"], "op": m["op"], "variant": m["label"]} for m in model]
    key, label = _pick_size_key(sized, size_key)
    model = [{**m, "x": _size(m, key)} for m in model]
    return _throughput(real, notes, metric, x_of=lambda r: _size(r, key), xlabel=label, title=title, op=op,
                       model=model)


def _choose_bars(real: Sequence[Mapping[str, Any]], shape: Mapping[str, int] | None,
                 notes: list[str]) -> tuple[dict[str, Mapping[str, Any]], str]:
    """Return one record per variant (its fastest at ``shape``, else at the largest shape all share, else at its
    own largest) and how the shape was chosen."""
    by_variant: dict[str, list[Mapping[str, Any]]] = {}
    for r in real:
        by_variant.setdefault(r["variant"], []).append(r)
    chosen: dict[str, Mapping[str, Any]] = {}
    if shape is not None:
        for v, recs in by_variant.items():
            hit = [r for r in recs if dict(r["shape"]) == dict(shape)]
            if hit:
                chosen[v] = min(hit, key=lambda r: r["time_ms"])
        return chosen, _shape_str(shape)
    if not by_variant:
        return chosen, ""
    shapes = [{tuple(r["shape"].items()) for r in recs} for recs in by_variant.values()]
    common = set.intersection(*shapes)
    if common:
        best = max(common, key=lambda s: math.prod(v for _, v in s))
        for v, recs in by_variant.items():
            chosen[v] = min((r for r in recs if tuple(r["shape"].items()) == best), key=lambda r: r["time_ms"])
        return chosen, _shape_str(dict(best))
    for v, recs in by_variant.items():
        chosen[v] = max(recs, key=lambda r: (math.prod(r["shape"].values()), -r["time_ms"]))
    notes.append("No shape is shared by all variants: each bar is that variant's largest shape.")
    return chosen, "each variant at its largest shape"


def _peak_line(fig: go.Figure, chosen: Sequence[Mapping[str, Any]], metric: str, notes: list[str]) -> None:
    """Draw the datasheet peak of the bars' GPU as a dashed line, unless unknown or every bar is below 10% of it."""
    unit = _UNITS[metric]
    spec = hardware.lookup(chosen[0]["device"]["name"])
    if spec is None:
        return
    try:
        peak = hardware.peak_tflops(spec, chosen[0]["dtype"]) if metric == "tflops" else float(spec.bandwidth_gbs)
    except ValueError as e:
        notes.append(str(e))
        return
    if max(r[metric] for r in chosen) < 0.1 * peak:
        notes.append(f"Datasheet peak {_fmt(peak)} {unit} ({spec.name}) not drawn: every bar is below 10% of it.")
        return
    fig.add_hline(
        y=peak, line=dict(color=_ROOF, dash="dash", width=1),
        annotation_text=f"datasheet peak {_fmt(peak)} {unit} ({spec.name})",
        annotation_position="top left", annotation_font_size=11,
    )


def compare_variants(
    records: Iterable[Mapping[str, Any]] | None,
    metric: str = "tflops",
    *,
    dtype: Any = None,
    shape: Mapping[str, int] | None = None,
    op: str | None = None,
    title: str | None = None,
    counted: Any = None,
    device: hardware.DeviceSpec | str | None = None,
) -> go.Figure:
    """Plot one bar per variant at one shape (default: the largest shape every variant has), with % of peak.

    Only one dtype is compared (``dtype``, default the most common). The datasheet peak of the bound
    resource is drawn as a dashed line when the GPU has a datasheet entry. With no real records the figure
    says none are recorded; emulated records are excluded with a note. ``counted`` (a
    :func:`workbench.counters_table` result) adds a hatched bar per variant from :func:`traffic_model`, labelled
    "model from emulated counters, not a measurement", on the records' GPU (else ``device``, this GPU or the H200).
    """
    _check_metric(metric)
    unit = _UNITS[metric]
    real, notes = _prepare(records)
    model = _model_for(counted, real, device, notes)
    op = op or (real[0]["op"] if real else model[0]["op"] if model else None)
    if real:
        want = hardware.canonical_dtype(dtype) if dtype is not None else Counter(
            r["dtype"] for r in real
        ).most_common(1)[0][0]
        others = [r for r in real if r["dtype"] != want]
        if others:
            notes.append(f"{len(others)} record(s) of other dtypes not shown (comparing {want}).")
        real = [r for r in real if r["dtype"] == want and r[metric] is not None]
    chosen, shape_note = _choose_bars(real, shape, notes)
    fig = go.Figure()
    for v, r in chosen.items():
        fig.add_trace(
            go.Bar(
                x=[v], y=[r[metric]], name=v, marker_color=variant_color(v),
                text=[_fmt(r["pct_peak"], "% of peak") if r["pct_peak"] is not None else ""],
                textposition="outside", hovertext=[_hover(r)], hoverinfo="text",
            )
        )
    if chosen:
        _peak_line(fig, list(chosen.values()), metric, notes)
    if model:
        fig.add_traces(_model_bars(model, metric))
        notes.append(_model_note(model).replace("Squares:", "Hatched bars:"))
    fig.update_yaxes(title_text=unit, rangemode="tozero")
    fig.update_xaxes(title_text="variant")
    head = title or f"{op or ''} variants compared ({unit})".strip()
    sub = f"{shape_note}, {_provenance(list(chosen.values()))}" if chosen else "no real-GPU measurements"
    if model:
        sub += f"; model at {_shape_str(model[0]['shape'])}, {model[0]['dtype']}"
    _finish(fig, head, sub, *_banner_or_note(notes, op, bool(chosen), bool(model)))
    fig.update_layout(showlegend=bool(model), bargap=0.35, barmode="group")
    if not chosen and not model:
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
    return fig


# ---------------------------------------------------------------------------------------------------------
# roofline


def _resolve_device(device: Any, records: Sequence[Mapping[str, Any]], notes: list[str]) -> Any:
    """Return (spec or None, how it was chosen); a device asked for by name must be known (KeyError listing them)."""
    if device is not None:
        return hardware.get_device(device)
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


def _roofline_points(points: Sequence[Mapping[str, Any]], peak: float | None, bw: float | None,
                     notes: list[str]) -> list[dict[str, Any]]:
    """Validate napkin-math points; return them with their attainable TFLOP/s (notes say which were left out)."""
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
                notes.append(f"point {p['label']!r} not drawn: no datasheet entry to bound it.")
                continue
            y = min(peak, bw * inten / 1e3) if peak else bw * inten / 1e3
        pts.append({**p, "intensity": inten, "tflops": float(y)})
    return pts


def _ceiling_traces(spec: hardware.DeviceSpec | None, dtype: str, tf32: bool, peak: float | None,
                    bw: float | None, lo_x: float, hi_x: float) -> list[go.Scatter]:
    """Return the ceiling lines: datasheet roof, fp32 SIMT for context, measured bandwidth and matmul ceilings.

    A ceiling that does not apply is an empty trace (the explorer keeps one trace structure for every choice).
    """
    group = dict(legendgroup="ceilings", legendgrouptitle_text="ceilings")
    dname = hardware.canonical_dtype(dtype) + (" (tf32)" if tf32 else "")
    ridge = peak * 1e3 / bw if peak and bw else None
    out = []
    if bw is not None:  # datasheet roof
        if peak:
            rx, ry = [lo_x, ridge, hi_x], [bw * lo_x / 1e3, peak, peak]
            name = f"datasheet roof: {_fmt(bw)} GB/s, {dname} {_fmt(peak)} TFLOP/s"
        else:
            rx, ry = [lo_x, hi_x], [bw * lo_x / 1e3, bw * hi_x / 1e3]
            name = f"datasheet memory roof: {_fmt(bw)} GB/s"
        out.append(go.Scatter(x=rx, y=ry, mode="lines", name=name, line=dict(color=_ROOF, width=3),
                              hoverinfo="name", **group))
    else:
        out.append(go.Scatter(x=[], y=[], name="datasheet roof", legendgroup="ceilings"))
    ctx = None  # fp32 SIMT ceiling for context
    if spec is not None and (hardware.canonical_dtype(dtype) != "float32" or tf32):
        ctx = float(spec.fp32_tflops)
    if ctx and bw:
        out.append(go.Scatter(x=[ctx * 1e3 / bw, hi_x], y=[ctx, ctx], mode="lines",
                              name=f"fp32 SIMT {_fmt(ctx)} TFLOP/s (context)",
                              line=dict(color=_CONTEXT, width=2, dash="dot"), hoverinfo="name", **group))
    else:
        out.append(go.Scatter(x=[], y=[], name="fp32 SIMT (context)", legendgroup="ceilings"))
    mbw = spec.measured_bandwidth_gbs if spec is not None else None  # measured ceilings
    mpk = hardware.measured_tflops(spec, dtype) if spec is not None and not tf32 else None
    top = mpk or peak
    dashed = dict(color=_MEASURED_CEIL, width=1.5, dash="dash")
    if mbw:
        end = top * 1e3 / mbw if top else hi_x
        out.append(go.Scatter(x=[lo_x, end], y=[mbw * lo_x / 1e3, mbw * end / 1e3], mode="lines",
                              name=f"measured copy bandwidth {_fmt(mbw)} GB/s", line=dashed, hoverinfo="name",
                              **group))
    else:
        out.append(go.Scatter(x=[], y=[], name="measured bandwidth", legendgroup="ceilings"))
    if mpk:
        start = mpk * 1e3 / (mbw or bw)
        out.append(go.Scatter(x=[start, hi_x], y=[mpk, mpk], mode="lines",
                              name=f"measured {dname} matmul {_fmt(mpk)} TFLOP/s", line=dashed, hoverinfo="name",
                              **group))
    else:
        out.append(go.Scatter(x=[], y=[], name="measured compute", legendgroup="ceilings"))
    return out


def _variant_traces(meas: Sequence[Mapping[str, Any]], pts: Sequence[Mapping[str, Any]],
                    names: Sequence[str], ridge: float | None) -> list[go.Scatter]:
    """Return per variant its measured points (filled circles) then its predicted points (open diamonds).

    Predicted points carry no text of their own: :func:`workbench.plot_labels.point_labels` lays their names out
    without overlaps.
    """
    out = []
    for name in names:
        mine = [r for r in meas if r["variant"] == name]
        out.append(go.Scatter(
            x=[r["flops"] / r["bytes"] for r in mine], y=[r["tflops"] for r in mine], mode="markers",
            name=f"{name} (measured)", marker=dict(color=variant_color(name), size=11, symbol="circle",
                                                  line=dict(color="white", width=1)),
            hovertext=[_hover(r) + f"<br>intensity {r['flops'] / r['bytes']:.3g} FLOP/B" for r in mine],
            hoverinfo="text", legendgroup="measured", legendgrouptitle_text="measured on GPU",
        ))
    for name in names:
        mine = [p for p in pts if p["label"] == name]
        out.append(go.Scatter(
            x=[p["intensity"] for p in mine], y=[p["tflops"] for p in mine], mode="markers",
            name=f"{name} (predicted)",
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
    return out


def _log_range(values: Sequence[float]) -> list[float]:
    return [math.log10(values[0]), math.log10(values[1])]


def _roofline_ceilings(spec: hardware.DeviceSpec | None, dtype: str, tf32: bool,
                       notes: list[str]) -> tuple[float | None, float | None, float | None]:
    """Return (dense peak TFLOP/s, datasheet bandwidth GB/s, ridge FLOP/B) of ``spec``; None where unknown."""
    if spec is None:
        return None, None, None
    bw = float(spec.bandwidth_gbs)
    try:
        peak = hardware.peak_tflops(spec, dtype, tf32=tf32)
    except ValueError as e:
        notes.append(str(e))
        return None, bw, None
    return peak, bw, hardware.ridge_point(spec, dtype, tf32=tf32)


def _roofline_names(meas: Sequence[Mapping[str, Any]], pts: Sequence[Mapping[str, Any]],
                    slots: Sequence[str] | None, notes: list[str]) -> list[str]:
    """Return the variant names drawn, in order: the explorer's slots, else measured then predicted names."""
    names = list(slots) if slots is not None else []
    found = [r["variant"] for r in meas] + ([p["label"] for p in pts] if slots is None else [])
    names += [n for n in dict.fromkeys(found) if n not in names]
    extra = [p for p in pts if p["label"] not in names]  # the explorer only draws its slots' names
    if extra:
        notes.append(f"{len(extra)} predicted point(s) with unknown labels not drawn.")
    return names


def _roofline_axes(fig: go.Figure, xs: Sequence[float], ys: Sequence[float], peak: float | None,
                   bw: float | None, ridge: float | None) -> tuple[float, float]:
    """Set log axes that hold every point, the ridge and two decades each side; return the x range."""
    lo_x = 10 ** math.floor(math.log10(min([*xs, (ridge or 1.0) / 100]) / 3))
    hi_x = 10 ** math.ceil(math.log10(max([*xs, (ridge or 1.0) * 10]) * 3))
    ys = list(ys) + ([bw * lo_x / 1e3] if bw else [])
    y_hi = max([*(ys or [1.0]), peak or 0.0]) * 6  # room above the flat roof for the names of compute-bound points
    y_lo = max(min(ys or [1e-3]) / 2.5, y_hi / 1e7)
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte of DRAM traffic)",
                     range=_log_range([lo_x, hi_x]), exponentformat="power", showgrid=True)
    fig.update_yaxes(type="log", title_text="TFLOP/s", range=_log_range([y_lo, y_hi]),
                     exponentformat="power", showgrid=True)
    return lo_x, hi_x


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
    model: Sequence[Mapping[str, Any]] = (),
) -> go.Figure:
    notes = list(notes)
    peak, bw, ridge = _roofline_ceilings(spec, dtype, tf32, notes)
    meas = [r for r in records if r["tflops"] is not None and r["bytes"] > 0 and r["flops"] > 0]
    if len(meas) < len(records):
        notes.append(f"{len(records) - len(meas)} record(s) without FLOPs or bytes not drawn.")
    pts = _roofline_points(points, peak, bw, notes)
    model = [m for m in model if m["intensity"]]
    names = _roofline_names(meas, pts, slots, notes)
    fig = go.Figure()
    xs = [r["flops"] / r["bytes"] for r in meas] + [p["intensity"] for p in pts] + [m["intensity"] for m in model]
    ys = [r["tflops"] for r in meas] + [p["tflops"] for p in pts] + [m["tflops"] for m in model]
    lo_x, hi_x = _roofline_axes(fig, xs + ([ridge] if ridge else []), ys, peak, bw, ridge)
    for trace in _ceiling_traces(spec, dtype, tf32, peak, bw, lo_x, hi_x) + _variant_traces(meas, pts, names, ridge):
        has_data = trace.x is not None and len(trace.x) > 0
        if slots is not None:
            trace.visible = has_data
        if slots is not None or has_data:
            fig.add_trace(trace)
    if model:
        fig.add_traces(_model_traces(model, "intensity", "tflops"))
        notes.append(_model_note(model))
    dname = hardware.canonical_dtype(dtype) + (" (tf32)" if tf32 else "")
    what = op or (meas[0]["op"] if meas else model[0]["op"] if model else "")
    head = title or f"Roofline{': ' + what if what else ''}, {dname} on {spec.name if spec else 'unknown GPU'}"
    sub = _provenance(meas) if meas else "datasheet ceilings (dense); no measurements drawn"
    fig = _finish(fig, head, sub, notes, None if meas else _none_recorded(op), empty_at_bottom=True)
    fig.update_layout(legend=dict(tracegroupgap=8))
    labels = [([p["label"]], p["intensity"], p["tflops"]) for p in pts if p["label"] in names]
    fig.layout.annotations = list(fig.layout.annotations) + point_labels(fig, labels, ridge and (ridge, peak),
                                                                         color_of=variant_color, ridge_color=_ROOF)
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
    counted: Any = None,
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
    ``counted`` (a :func:`workbench.counters_table` result, or several) adds the traffic model of
    :func:`traffic_model` as open squares in a legend group labelled "model from emulated counters, not a
    measurement": each variant at FLOPs / counted bytes, at the time its counted bytes and FLOPs allow.
    """
    real, notes = _prepare(records)
    tables = [] if counted is None else [counted] if hasattr(counted, "rows") else list(counted)
    if dtype is None:
        dtype = (Counter(r["dtype"] for r in real).most_common(1)[0][0] if real
                 else hardware.canonical_dtype(tables[0].dtype) if tables else "float32")
    want = hardware.canonical_dtype(dtype)
    others = [r for r in real if r["dtype"] != want]
    if others:
        notes.append(f"{len(others)} record(s) of other dtypes not shown (this roofline is {want}).")
    real = [r for r in real if r["dtype"] == want]
    spec = _resolve_device(device, real, notes)
    model = traffic_model(tables, spec) if tables and spec is not None else []
    if len([m for m in model if m["dtype"] == want]) < len(model):
        notes.append(f"modelled rows of other dtypes not shown (this roofline is {want}).")
    model = [m for m in model if m["dtype"] == want]
    op = op or (tables[0].op if tables else None)
    return _roofline(real, notes, spec, want, list(points or []), tf32=tf32, op=op, title=title, model=model)


def save_html(fig: go.Figure, path: str | Path) -> Path:
    """Write ``fig`` as a standalone HTML page (plotly.js embedded, works offline) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(path), include_plotlyjs=True, full_html=True)
    return path


def __getattr__(name: str) -> Any:
    # Notebook 04 calls wb.plots.routing_explorer: the widget lives in workbench.explorers (which imports this
    # module, so it is fetched on first use rather than at import).
    if name == "routing_explorer":
        from workbench.explorers import routing_explorer

        return routing_explorer
    raise AttributeError(f"module 'workbench.plots' has no attribute {name!r}")
