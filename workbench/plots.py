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

import inspect
import math
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

from workbench import hardware
from workbench.results import validate_record

__all__ = [
    "MODEL_LABEL",
    "compare_variants",
    "explorer",
    "roofline",
    "routing_explorer",
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
_LABEL_FONT = 11


def _wrap(text: str, width: int) -> list[str]:
    """Split plain ``text`` (its own ``<br>`` kept) into lines of at most ``width`` characters, at spaces."""
    lines = []
    for part in text.split("<br>"):
        lines += textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False) or [""]
    return lines


def _text_box(text: str, size: int) -> tuple[float, float]:
    """Return a generous (width, height) in px of ``text`` (``<br>`` lines, tags ignored) at font ``size``."""
    lines = [re.sub(r"<[^>]+>", "", line) for line in text.split("<br>")]
    return max(len(line) for line in lines) * size * 0.6, len(lines) * size * 1.35


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
    if kinds and kinds <= {"cuda"}:
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
    return dict(legendgroup="model", legendgrouptitle_text=f"{MODEL_LABEL}<br>({'; '.join(scopes)})")


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

    Predicted points carry no text of their own: :func:`_point_labels` lays their names out without overlaps.
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
    fig.layout.annotations = list(fig.layout.annotations) + _point_labels(fig, labels, ridge and (ridge, peak))
    return fig


# ---------------------------------------------------------------------------------------------------------
# label layout: names of predicted points and the ridge, placed so that no two texts overlap
#
# The figure's width follows the notebook's (plotly resizes it), so a layout must hold at every plot width a
# learner may have: a spot is taken only if it is free at each of _PLOT_WIDTHS (px of plot area beside the
# legend: ~440 in JupyterLab's default layout, an ~850 px figure; ~900 with the file browser closed on a wide
# screen). The height is the figure's own.

_PLOT_WIDTHS = (420, 520, 680, 900)
Box = tuple[float, float, float, float]


def _to_px(fig: go.Figure, x: float, y: float, width: float) -> tuple[float, float]:
    """Map a data point of a log-log figure to plot-area px (origin top left) for a plot ``width`` px wide."""
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    return (math.log10(x) - x0) / (x1 - x0) * width, (1 - (math.log10(y) - y0) / (y1 - y0)) * height


def _banner_box(fig: go.Figure, width: float) -> list[Box]:
    """Return the 'none recorded' banner's box when it sits inside the plot (the roofline's, bottom right)."""
    height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    boxes = []
    for a in fig.layout.annotations:
        if a.name == "none-recorded" and a.xanchor == "right":
            w, h = _text_box(a.text, a.font.size)
            w, h = w + 2 * (a.borderpad or 0) + 2, h + 2 * (a.borderpad or 0) + 2
            right, bottom = a.x * width, (1 - a.y) * height
            boxes.append((right - w, bottom - h, right, bottom))
    return boxes


def _overlap(a: Box, b: Box, pad: float = 3.0) -> float:
    """Return the overlap area of two (x0, y0, x1, y1) boxes grown by ``pad``."""
    w = min(a[2], b[2]) - max(a[0], b[0]) + 2 * pad
    h = min(a[3], b[3]) - max(a[1], b[1]) + 2 * pad
    return max(w, 0.0) * max(h, 0.0)


def _clusters(items: Sequence[tuple[list[str], float, float]], fig: go.Figure,
              near_px: float = 16.0) -> list[tuple[list[str], float, float]]:
    """Merge points whose markers touch in the narrowest plot; each cluster keeps its first point."""
    out: list[tuple[list[str], float, float, tuple[float, float]]] = []
    for names, x, y in items:
        px = _to_px(fig, x, y, _PLOT_WIDTHS[0])
        for i, (n2, x2, y2, p2) in enumerate(out):
            if abs(px[0] - p2[0]) < near_px and abs(px[1] - p2[1]) < near_px:
                out[i] = (n2 + [n for n in names if n not in n2], x2, y2, p2)
                break
        else:
            out.append((list(names), x, y, px))
    return [(n, x, y) for n, x, y, _ in out]


def _label_text(names: Sequence[str], most: int = 6) -> str:
    """Return the names, each in its variant's colour, comma-separated on short lines (at most ``most`` names:
    a crowd of variants at one point is counted, and the legend lists them all)."""
    shown = list(names) if len(names) <= most else list(names[:3])
    parts = [f"<span style='color:{variant_color(n)}'>{n}</span>" for n in shown]
    widths = [len(n) for n in shown]
    if len(shown) < len(names):
        parts.append(f"and {len(names) - len(shown)} more (see the legend)")
        widths.append(len(parts[-1]))
    lines, cur, width = [], [], 0
    for part, w in zip(parts, widths, strict=True):
        if cur and width + 2 + w > 38:
            lines.append(", ".join(cur) + ",")
            cur, width = [], 0
        cur.append(part)
        width += w + (2 if width else 0)
    lines.append(", ".join(cur))
    head = [f"{len(names)} variants:"] if len(shown) < len(names) else []
    return "<br>".join(head + lines)


# Where a label may go around its point, nearest first: (ax, ay) from the point to the label's anchor, in px
# (y down), and which side of the label box sits at that anchor.
_SPOTS = [(12, 0, "left", "middle"), (-12, 0, "right", "middle"), (0, -12, "center", "bottom"),
          (0, 12, "center", "top")]
_SPOTS += [(d * sx, d * sy, "left" if sx > 0 else "right", "top" if sy > 0 else "bottom")
           for d in (18, 36) for sx, sy in ((1, 1), (-1, -1), (1, -1), (-1, 1))]
_SPOTS += [(0, d * sy, "center", "top" if sy > 0 else "bottom") for d in (30, 50) for sy in (1, -1)]
_SPOTS += [(d * sx, d * sy, "left" if sx > 0 else "right", "top" if sy > 0 else "bottom")
           for d in (60, 90) for sx, sy in ((1, 1), (-1, -1), (1, -1), (-1, 1))]


def _spot_box(anchor: tuple[float, float], spot: tuple[int, int, str, str], box: tuple[float, float]) -> Box:
    """Return the (x0, y0, x1, y1) px box of a ``box``-sized label put at ``spot`` around ``anchor``."""
    ax, ay, xanchor, yanchor = spot
    x, y = anchor[0] + ax, anchor[1] + ay
    x0 = {"left": x, "right": x - box[0], "center": x - box[0] / 2}[xanchor]
    y0 = {"top": y, "bottom": y - box[1], "middle": y - box[1] / 2}[yanchor]
    return x0, y0, x0 + box[0], y0 + box[1]


def _spot_cost(rects: Sequence[Box], taken: Sequence[Sequence[Box]], height: float) -> float:
    """Return how badly a label's boxes (one per plot width) leave the plot or overlap what is there."""
    cost = 0.0
    for rect, width, boxes in zip(rects, _PLOT_WIDTHS, taken, strict=True):
        outside = max(0.0, -rect[0]) + max(0.0, rect[2] - width) + max(0.0, -rect[1]) + max(0.0, rect[3] - height)
        cost += outside * 1000 + sum(_overlap(rect, t) for t in boxes)
    return cost


def _point_labels(fig: go.Figure, items: Sequence[tuple[list[str], float, float]],
                  ridge: tuple[float, float] | None) -> list[dict[str, Any]]:
    """Return annotations naming the predicted points (and the ridge), laid out so that no two texts overlap.

    Points whose markers touch share one label listing their names. Each label goes to the nearest spot
    around its point that, at every plot width in ``_PLOT_WIDTHS``, stays inside the plot and clear of the
    labels placed before, the markers and the 'none recorded' banner (else to the spot that overlaps
    least), with a thin leader line to its point.
    """
    height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    clusters = _clusters(items, fig)
    taken: list[list[Box]] = []
    for width in _PLOT_WIDTHS:  # the banner and the markers themselves
        px = [_to_px(fig, x, y, width) for _, x, y in clusters]
        taken.append(_banner_box(fig, width) + [(a - 8, b - 8, a + 8, b + 8) for a, b in px])
    todo = [(_label_text(n), x, y, "#444444", "point-label") for n, x, y in sorted(clusters, key=lambda c: c[1])]
    if ridge:  # last: the points' names get the nearest spots
        todo.append((f"ridge {ridge[0]:.0f} FLOP/B", ridge[0], ridge[1], _ROOF, "ridge"))
    out = []
    for text, x, y, color, name in todo:
        w, h = _text_box(text, _LABEL_FONT)
        anchors = [_to_px(fig, x, y, width) for width in _PLOT_WIDTHS]
        best = None
        for i, spot in enumerate(_SPOTS):
            rects = [_spot_box(a, spot, (w + 6, h + 4)) for a in anchors]
            cost = _spot_cost(rects, taken, height)
            if best is None or (cost, i) < best[0]:
                best = ((cost, i), spot, rects)
            if cost == 0:
                break
        _, (ax, ay, xanchor, yanchor), rects = best
        for boxes, rect in zip(taken, rects, strict=True):
            boxes.append(rect)
        out.append(dict(
            x=math.log10(x), y=math.log10(y), xref="x", yref="y", text=text, name=name, showarrow=True,
            ax=ax, ay=ay, xanchor=xanchor, yanchor=yanchor, arrowhead=0, arrowwidth=1, arrowcolor="#666666",
            standoff=7, align="left", font=dict(size=_LABEL_FONT, color=color),
            bgcolor="rgba(255, 255, 255, 0.85)", borderpad=2,
        ))
    return out


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
    """Return ``fn(**shape, dtype=dtype)`` as a float (without ``dtype`` if ``fn`` takes none); None if no ``fn``."""
    if not callable(fn):
        return None
    try:
        params = inspect.signature(fn).parameters.values()
        takes_dtype = any(p.name == "dtype" or p.kind is p.VAR_KEYWORD for p in params)
    except (TypeError, ValueError):  # a builtin without a signature: pass it
        takes_dtype = True
    out = fn(**shape, dtype=dtype) if takes_dtype else fn(**shape)
    return None if out is None else float(out)


NAPKIN_LABEL = "napkin bound, not a measurement:<br>compulsory bytes / copy bandwidth, FLOPs / peak"


def _napkin_bound(spec: hardware.DeviceSpec | None, dtype: Any, sizes: Sequence[Any],
                  shape_fn: Callable[[Any], Mapping[str, int]], flops_fn: Callable[..., float] | None,
                  bytes_fn: Callable[..., float] | None, metric: str) -> go.Scatter:
    """Return the op's best possible throughput at each size as a dashed line (no variant, nothing measured).

    Time >= the op's compulsory bytes / the device's copy bandwidth and >= its FLOPs / the dtype's dense peak,
    from :mod:`workbench.hardware`: the traffic model with every byte moved once. At a GPU benchmark's sizes the
    emulators are too slow to count a real kernel's traffic, so this is the ceiling a kernel can approach.
    """
    spec = spec or hardware.DEVICES[hardware.DEFAULT_DEVICE]
    bw, bw_what, peak = _model_ceilings(spec, hardware.canonical_dtype(dtype))
    xs, ys, hover = [], [], []
    for size in sizes:
        shape = dict(shape_fn(size))
        fl = _call_count(flops_fn, shape, dtype) or 0.0
        by = _call_count(bytes_fn, shape, dtype) or 0.0
        t = max(by / (bw * 1e9), fl / (peak * 1e12) if peak else 0.0)
        if t <= 0 or not isinstance(size, (int, float)):
            continue
        xs.append(size)
        ys.append(fl / t / 1e12 if metric == "tflops" else by / t / 1e9)
        hover.append(f"{_shape_str(shape)}: at best {t * 1e6:.3g} µs on {spec.name} ({bw_what})")
    return go.Scatter(x=xs, y=ys, mode="lines", name="napkin bound", line=dict(color=_ROOF, width=1.5, dash="dash"),
                      hovertext=hover, hoverinfo="text", legendgroup="napkin", legendgrouptitle_text=NAPKIN_LABEL)


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
        # Nothing measured: the napkin bound over the sizes, so that the figure is not empty (always one trace,
        # hidden beside measurements: the widget updates its traces in place).
        bound = _napkin_bound(spec, dtype, sizes, shape_fn, flops_fn, bytes_fn, metric)
        thr.add_trace(bound)
        thr.data[-1].visible = not sized
        if not sized and bound.x:  # the axes the bound is read against
            thr.update_xaxes(showticklabels=True, type="log" if _spread(list(bound.x)) >= 8 else None)
            thr.update_yaxes(showticklabels=True, rangemode="tozero")
            thr.update_layout(showlegend=True)
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


# ---------------------------------------------------------------------------------------------------------
# routing explorer


def _check_routing_args(T: Any, E: Any, top_k: Any, seed: Any, skew: Any, max_skew: Any) -> None:
    """Raise ValueError naming routing_explorer when an argument is not what it expects."""
    for name, v in (("T", T), ("E", E), ("top_k", top_k), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "seed" else 1):
            raise ValueError(f"routing_explorer: {name} must be an int >= {0 if name == 'seed' else 1}, got {v!r}")
    if top_k > E:
        raise ValueError(f"routing_explorer: top_k must be in [1, E={E}], got {top_k}")
    for name, v in (("skew", skew), ("max_skew", max_skew)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise ValueError(f"routing_explorer: {name} must be a finite number >= 0, got {v!r}")
    if skew > max_skew:
        raise ValueError(f"routing_explorer: skew must be <= max_skew={max_skew}, got {skew}")


def routing_explorer(T: int = 4096, E: int = 64, top_k: int = 8, seed: int = 0, *, skew: float = 2.0,
                     max_skew: float = 4.0) -> Any:
    """Build a slider over router skew and a bar chart of tokens per expert; return an ``ipywidgets.VBox``.

    ``T`` tokens are routed to their ``top_k`` of ``E`` experts (softmax, then top-k, as the moe contract routes)
    from seeded standard-normal logits: once as they are (a uniform router), once with a learned-looking bias
    ``skew * (1 - e / (E - 1))^3`` added to expert e's logit (strongest for the first experts). The imbalance factor
    is the busiest expert's load over the mean load (1 for a perfectly balanced router): the busiest expert sets the
    pace of a grouped GEMM. Moving the slider (0 to ``max_skew``) redraws the skewed bars in place. The returned box
    exposes ``skew_slider``, ``figure`` (the FigureWidget: trace 0 uniform, trace 1 skewed), ``info``,
    ``loads(skew) -> (counts per expert, imbalance)``, ``imbalance(skew)`` and ``refresh()``.
    """
    import ipywidgets as widgets
    import torch

    _check_routing_args(T, E, top_k, seed, skew, max_skew)
    base = torch.randn(T, E, generator=torch.Generator().manual_seed(seed))  # the uniform router's logits
    popular = torch.linspace(1, 0, E) ** 3  # a learned-looking bias, strongest for the first experts

    def loads(s: float) -> tuple[list[int], float]:
        probs = torch.softmax(base + float(s) * popular, dim=-1)
        counts = torch.bincount(torch.topk(probs, top_k, dim=-1).indices.reshape(-1), minlength=E)
        return counts.tolist(), counts.max().item() / counts.float().mean().item()

    c0, imb0 = loads(0.0)
    fig = go.FigureWidget(layout=dict(barmode="overlay", height=360, xaxis_title="expert",
                                      yaxis_title="(token, expert) slots",
                                      title=f"Tokens per expert: T={T}, E={E}, top-{top_k}"))
    fig.add_bar(x=list(range(E)), y=c0, name=f"uniform router (max/mean {imb0:.2f})", opacity=0.6)
    fig.add_bar(x=list(range(E)), y=c0, name="skewed router", opacity=0.6)
    step = max_skew / 8 if max_skew > 0 else 0.5
    slider = widgets.FloatSlider(value=float(skew), min=0.0, max=float(max_skew), step=step,
                                 description="router skew", continuous_update=False)
    info = widgets.HTML()

    def refresh(*_: Any) -> None:
        counts, imb = loads(slider.value)
        with fig.batch_update():
            fig.data[1].y = counts
            fig.data[1].name = f"skewed router (max/mean {imb:.2f})"
        mean = T * top_k / E
        info.value = (f"busiest expert: {max(counts)} slots, mean {mean:.0f}: imbalance <b>{imb:.2f}</b>; "
                      f"experts with no token: {sum(c == 0 for c in counts)}")

    slider.observe(refresh, names="value")
    refresh()
    box = widgets.VBox([slider, info, fig])
    box.skew_slider = slider
    box.figure = fig
    box.info = info
    box.loads = loads
    box.imbalance = lambda s: loads(s)[1]
    box.refresh = refresh
    return box
