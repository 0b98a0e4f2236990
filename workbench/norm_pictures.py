"""Draw notebook 07's numerics: a variance's fp32 error against the row mean, and MXFP4's block scales.

:func:`precision_figure` plots the rows of ``kernels.layernorm.precision.variance_error`` (one line per method:
one-pass, two-pass, Welford) on log axes, the error of each fp32 variance against float64 as the rows' mean grows,
with the variance itself (the rows are ``mean + N(0, 1)``) as a dashed line: a point above it is an error larger
than what it measures. A NaN (a negative one-pass variance under the square root) is drawn as an ``x`` on the top
edge. :func:`block_scales_figure` draws a small matrix beside its MXFP4 scale exponents: one e8m0 power of two
per block of ``block`` consecutive values along a row (K), the values as a heatmap with the block edges marked, the
exponents below as one cell per block; :func:`block_scales_explorer` puts one value of that matrix under a slider,
so that moving it shows which block's scale follows it and what the block's other values lose. Plotly and ipywidgets
are imported here, not with ``workbench``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = ["METHOD_LABELS", "block_scales_explorer", "block_scales_figure", "precision_figure"]

#: How the figure names each method of ``variance_error``.
METHOD_LABELS = {"one_pass": "one-pass E[x²] − E[x]²", "two_pass": "two-pass mean((x − mean)²)",
                 "welford": "Welford (per lane) + Chan's merge"}
_COLORS = {"one_pass": "#d62728", "two_pass": "#1f77b4", "welford": "#2ca02c"}


def _finite_pos(v: float) -> bool:
    return math.isfinite(v) and v > 0


def precision_figure(study: Mapping[str, Any], *, which: str = "var_error", title: str | None = None) -> go.Figure:
    """Return a log-log figure of each method's largest fp32 error (``which``: var_error or rstd_error) by row mean.

    ``study`` is :func:`kernels.layernorm.precision.variance_error`'s result. Errors of exactly 0 are drawn at the
    figure's floor (a log axis has no 0); infinite ones (a NaN rstd) as an ``x`` at its top edge.
    """
    if which not in ("var_error", "rstd_error"):
        raise ValueError(f"precision_figure: which must be 'var_error' or 'rstd_error', got {which!r}")
    try:
        means, errors = [float(m) for m in study["means"]], study[which]
    except (KeyError, TypeError):
        raise ValueError("precision_figure: study must be variance_error()'s dict with 'means' and "
                         f"'{which}'") from None
    if not means or any(m <= 0 for m in means):
        raise ValueError(f"precision_figure: the row means must be positive (a log axis), got {means}")
    bad = [k for k, v in errors.items() if len(v) != len(means)]
    if bad:
        raise ValueError(f"precision_figure: {bad[0]} has {len(errors[bad[0]])} errors for {len(means)} means (one "
                         "error per row mean)")
    finite = [e for v in errors.values() for e in v if _finite_pos(e)]
    lo = min(finite, default=1e-8) / 4
    hi = max(finite + [1.0], default=1.0) * 8
    fig = go.Figure()
    for method, errs in errors.items():
        ys = [e if _finite_pos(e) else (lo if e == 0 else None) for e in errs]
        fig.add_trace(go.Scatter(
            x=means, y=ys, mode="lines+markers", name=METHOD_LABELS.get(method, method),
            line_color=_COLORS.get(method), hovertemplate="row mean %{x:.3g}: error %{y:.2e}<extra></extra>"))
        nan_at = [m for m, e in zip(means, errs, strict=True) if not math.isfinite(e)]
        if nan_at:
            fig.add_trace(go.Scatter(
                x=nan_at, y=[hi / 1.5] * len(nan_at), mode="markers", marker_symbol="x", marker_size=10,
                marker_color=_COLORS.get(method), name=f"{method.replace('_', '-')}: NaN rstd (var < −eps)",
                hovertemplate="row mean %{x:.3g}: variance negative, rstd NaN<extra></extra>"))
    if which == "var_error":
        fig.add_trace(go.Scatter(x=[means[0], means[-1]], y=[1.0, 1.0], mode="lines", line_dash="dash",
                                 line_color="gray", name="the variance itself (std 1)", hoverinfo="skip"))
    what = "variance" if which == "var_error" else "rstd = 1/sqrt(var + eps)"
    fig.update_layout(
        title=title or f"fp32 {what}: largest error against float64, rows of mean + N(0, 1)",
        xaxis_type="log", yaxis_type="log", xaxis_title="row mean (std 1)",
        yaxis_title=f"largest |error| of the {what.split(' ')[0]}", yaxis_range=[math.log10(lo), math.log10(hi)],
        height=420, legend=dict(x=0.01, y=0.99, bgcolor="rgba(255,255,255,0.8)"))
    return fig


def _matrix(x: Any, what: str) -> list[list[float]]:
    """Return ``x`` (a tensor, an array or nested lists) as a 2-D list of floats, or raise ValueError."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    try:
        rows = [[float(v) for v in r] for r in x]
    except (TypeError, ValueError):
        raise ValueError(f"block_scales_figure: {what} must be a 2-D array of numbers, got {x!r:.80}") from None
    if not rows or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError(f"block_scales_figure: {what} must be a non-empty 2-D array with rows of one length")
    return rows


def block_scales_figure(x: Any, exponents: Any, block: int = 32, *, title: str | None = None) -> go.Figure:
    """Return a figure of ``x[R, K]`` (top) over its per-block scale exponents ``[R, K / block]`` (bottom).

    Block ``j`` of row ``r`` holds ``x[r, j*block:(j+1)*block]`` and is stored as e2m1 codes times
    ``2**exponents[r][j]``. The top panel colours each value, with the block edges as white lines; the bottom
    panel writes each block's exponent in its cell.
    """
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block_scales_figure: block must be an int >= 1, got {block!r}")
    vals, exps = _matrix(x, "x"), _matrix(exponents, "exponents")
    r, k = len(vals), len(vals[0])
    if k % block or (len(exps), len(exps[0])) != (r, k // block):
        raise ValueError(f"block_scales_figure: x is [{r}, {k}], so exponents must be [{r}, {k // block}] "
                         f"(K a multiple of block = {block}), got [{len(exps)}, {len(exps[0])}]")
    amax = max(abs(v) for row in vals for v in row) or 1.0
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.16, row_heights=[0.55, 0.45],
                        subplot_titles=(f"values: {r} rows x {k} along K (white lines: blocks of {block})",
                                        "each block's shared scale: 2^e, e written in the cell"))
    fig.add_trace(go.Heatmap(z=vals, colorscale="RdBu", zmid=0, zmin=-amax, zmax=amax, showscale=False,
                             hovertemplate="row %{y}, k %{x}: %{z:.3f}<extra></extra>"), row=1, col=1)
    centres = [j * block + (block - 1) / 2 for j in range(k // block)]
    text = [[f"{int(e)}" for e in row] for row in exps]
    hover = [[f"row {i}, k {j * block}..{(j + 1) * block - 1}: scale 2^{int(e)} = {2.0 ** e:.4g}"
              for j, e in enumerate(row)] for i, row in enumerate(exps)]
    fig.add_trace(go.Heatmap(z=exps, x=centres, colorscale="Viridis", text=text, texttemplate="%{text}",
                             hovertext=hover, hoverinfo="text", colorbar=dict(title="e", len=0.4, y=0.2)),
                  row=2, col=1)
    for j in range(1, k // block):
        for row in (1, 2):
            fig.add_vline(x=j * block - 0.5, line_color="white", line_width=3, row=row, col=1)
    for row in (1, 2):
        fig.update_xaxes(range=[-0.5, k - 0.5], row=row, col=1)
        fig.update_yaxes(autorange="reversed", title_text="row", row=row, col=1)
    fig.update_xaxes(title_text="k (position along K)", row=2, col=1)
    fig.update_layout(title=title or "MXFP4: one power-of-two scale per block of 32 values along K",
                      height=460, meta={"blocks": k // block, "rows": r})
    return fig


def block_scales_explorer(x: Any, quantize: Callable[[Any], tuple[Any, Any]], *, row: int = 1, col: int = 40,
                          block: int = 32, low: int = 1, high: int = 64, value: int = 24) -> Any:
    """Return a slider over the value ``x[row, col]`` and :func:`block_scales_figure` of the result (a VBox).

    ``x`` is a 2-D torch tensor (left unchanged: each step quantizes a copy); ``quantize(x)`` returns
    ``(dequantized [R, K], exponents [R, K / block])``, e.g. MXFP4's quantizer and decoder. The box exposes
    ``value_slider``, ``figure`` (a ``FigureView``), ``info`` (the row's exponents and largest error per block) and
    ``state(v) -> (x with x[row, col] = v, dequantized, exponents)``.
    """
    import ipywidgets as widgets

    from workbench.figure_view import FigureView

    rows, k = (int(d) for d in x.shape)
    if not (0 <= row < rows and 0 <= col < k):
        raise ValueError(f"block_scales_explorer: (row, col) = ({row}, {col}) is outside x [{rows}, {k}]")
    if not low <= value <= high:
        raise ValueError(f"block_scales_explorer: value must be in [low, high] = [{low}, {high}], got {value!r}")

    def state(v: float) -> tuple[Any, Any, Any]:
        xv = x.clone()
        xv[row, col] = float(v)
        back, exps = quantize(xv)
        return xv, back, exps

    def figure(v: float) -> go.Figure:
        xv, _, exps = state(v)
        return block_scales_figure(xv, exps, block, title=f"MXFP4 with x[{row}, {col}] = {v}: block "
                                   f"{col // block}'s scale follows it")

    fig = FigureView(figure(value))
    slider = widgets.IntSlider(value=value, min=low, max=high, step=1, description=f"x[{row}, {col}]",
                               continuous_update=False)
    info = widgets.HTML()

    def refresh(*_: Any) -> None:
        xv, back, exps = state(slider.value)
        fig.redraw(figure(slider.value))
        err = (back[row] - xv[row].to(back.dtype)).abs().reshape(-1, block).amax(-1).tolist()
        info.value = (f"row {row}: scale exponents {[int(e) for e in exps[row].tolist()]}; largest |error| per "
                      f"block {[round(e, 3) for e in err]} (block {col // block} holds x[{row}, {col}])")

    slider.observe(refresh, names="value")
    refresh()
    box = widgets.VBox([slider, info, fig])
    box.value_slider, box.figure, box.info, box.state = slider, fig, info, state
    return box
