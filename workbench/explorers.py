"""Interactive explorers (ipywidgets): an op's roofline and throughput under controls, and an MoE router's load.

:func:`explorer` (what ``wb.explore`` shows) draws :mod:`workbench.plots`' roofline and throughput figures for the
variants, dtype and size the controls pick, and redraws them in place; with no GPU records it draws the napkin
bound instead (compulsory bytes at the copy bandwidth, FLOPs at the dense peak: no variant, nothing measured).
:func:`routing_explorer` (notebook 04, as ``wb.plots.routing_explorer``) shows tokens per expert as a router's skew
changes. ipywidgets and torch are imported when an explorer is built, not with this module.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from workbench import hardware
from workbench.plots import (
    _ROOF,
    _check_metric,
    _model_ceilings,
    _prepare,
    _resolve_device,
    _roofline,
    _shape_str,
    _spread,
    _throughput,
    variant_color,
)

__all__ = ["NAPKIN_LABEL", "explorer", "routing_explorer"]


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
    redraws both figures (``FigureView``s). ``records=None`` loads ``results/`` for ``op``; emulated records are
    excluded with a note. ``variants`` need ``.name``, ``.backend``, ``.idea``, ``.flops(**shape, dtype=)``
    and ``.bytes(**shape, dtype=)``. The returned box exposes ``variant_select``, ``dtype_dropdown``,
    ``size_slider``, ``figures`` (roofline, throughput), ``roofline_figure``, ``throughput_figure``, ``info``
    and ``refresh()``.
    """
    import ipywidgets as widgets

    from workbench.figure_view import FigureView
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
        # hidden beside measurements).
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
    roof_fig = FigureView(roof0)
    thr_fig = FigureView(thr0)
    info.value = table0

    def refresh(*_: Any) -> None:
        roof, thr, table = build()
        roof_fig.redraw(roof)
        thr_fig.redraw(thr)
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
    exposes ``skew_slider``, ``figure`` (a ``FigureView``: trace 0 uniform, trace 1 skewed), ``info``,
    ``loads(skew) -> (counts per expert, imbalance)``, ``imbalance(skew)`` and ``refresh()``.
    """
    import ipywidgets as widgets
    import torch

    from workbench.figure_view import FigureView

    _check_routing_args(T, E, top_k, seed, skew, max_skew)
    base = torch.randn(T, E, generator=torch.Generator().manual_seed(seed))  # the uniform router's logits
    popular = torch.linspace(1, 0, E) ** 3  # a learned-looking bias, strongest for the first experts

    def loads(s: float) -> tuple[list[int], float]:
        probs = torch.softmax(base + float(s) * popular, dim=-1)
        counts = torch.bincount(torch.topk(probs, top_k, dim=-1).indices.reshape(-1), minlength=E)
        return counts.tolist(), counts.max().item() / counts.float().mean().item()

    c0, imb0 = loads(0.0)
    bars = [go.Bar(x=list(range(E)), y=c0, name=f"uniform router (max/mean {imb0:.2f})", opacity=0.6),
            go.Bar(x=list(range(E)), y=c0, name="skewed router", opacity=0.6)]
    fig = FigureView(go.Figure(bars, layout=dict(barmode="overlay", height=360, xaxis_title="expert",
                                                 yaxis_title="(token, expert) slots",
                                                 title=f"Tokens per expert: T={T}, E={E}, top-{top_k}")))
    step = max_skew / 8 if max_skew > 0 else 0.5
    slider = widgets.FloatSlider(value=float(skew), min=0.0, max=float(max_skew), step=step,
                                 description="router skew", continuous_update=False)
    info = widgets.HTML()

    def refresh(*_: Any) -> None:
        counts, imb = loads(slider.value)
        with fig.batch_update() as f:
            f.data[1].y = counts
            f.data[1].name = f"skewed router (max/mean {imb:.2f})"
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
