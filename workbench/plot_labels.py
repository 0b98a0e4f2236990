"""Lay out the names of a log-log figure's points (and its ridge) so that no two texts overlap.

The roofline names its predicted points beside them rather than in hover text. The figure's width follows the
notebook's (plotly resizes it), so a layout must hold at every plot width a learner may have: a spot is taken only
if it is free at each of :data:`PLOT_WIDTHS` (px of plot area beside the legend: ~440 in JupyterLab's default
layout, an ~850 px figure; ~900 with the file browser closed on a wide screen). The height is the figure's own.
Text sizes are estimated (:func:`text_box`), generously, since the browser's font metrics are not known here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = ["LABEL_FONT", "PLOT_WIDTHS", "Box", "overlap", "point_labels", "spot_box", "text_box", "to_px"]

LABEL_FONT = 11


def text_box(text: str, size: int) -> tuple[float, float]:
    """Return a generous (width, height) in px of ``text`` (``<br>`` lines, tags ignored) at font ``size``."""
    lines = [re.sub(r"<[^>]+>", "", line) for line in text.split("<br>")]
    return max(len(line) for line in lines) * size * 0.6, len(lines) * size * 1.35


PLOT_WIDTHS = (420, 520, 680, 900)
Box = tuple[float, float, float, float]


def to_px(fig: go.Figure, x: float, y: float, width: float) -> tuple[float, float]:
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
            w, h = text_box(a.text, a.font.size)
            w, h = w + 2 * (a.borderpad or 0) + 2, h + 2 * (a.borderpad or 0) + 2
            right, bottom = a.x * width, (1 - a.y) * height
            boxes.append((right - w, bottom - h, right, bottom))
    return boxes


def overlap(a: Box, b: Box, pad: float = 3.0) -> float:
    """Return the overlap area of two (x0, y0, x1, y1) boxes grown by ``pad``."""
    w = min(a[2], b[2]) - max(a[0], b[0]) + 2 * pad
    h = min(a[3], b[3]) - max(a[1], b[1]) + 2 * pad
    return max(w, 0.0) * max(h, 0.0)


def _clusters(items: Sequence[tuple[list[str], float, float]], fig: go.Figure,
              near_px: float = 16.0) -> list[tuple[list[str], float, float]]:
    """Merge points whose markers touch in the narrowest plot; each cluster keeps its first point."""
    out: list[tuple[list[str], float, float, tuple[float, float]]] = []
    for names, x, y in items:
        px = to_px(fig, x, y, PLOT_WIDTHS[0])
        for i, (n2, x2, y2, p2) in enumerate(out):
            if abs(px[0] - p2[0]) < near_px and abs(px[1] - p2[1]) < near_px:
                out[i] = (n2 + [n for n in names if n not in n2], x2, y2, p2)
                break
        else:
            out.append((list(names), x, y, px))
    return [(n, x, y) for n, x, y, _ in out]


def _label_text(names: Sequence[str], color_of: Callable[[str], str], most: int = 6) -> str:
    """Return the names, each in its variant's colour, comma-separated on short lines (at most ``most`` names:
    a crowd of variants at one point is counted, and the legend lists them all)."""
    shown = list(names) if len(names) <= most else list(names[:3])
    parts = [f"<span style='color:{color_of(n)}'>{n}</span>" for n in shown]
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


def spot_box(anchor: tuple[float, float], spot: tuple[int, int, str, str], box: tuple[float, float]) -> Box:
    """Return the (x0, y0, x1, y1) px box of a ``box``-sized label put at ``spot`` around ``anchor``."""
    ax, ay, xanchor, yanchor = spot
    x, y = anchor[0] + ax, anchor[1] + ay
    x0 = {"left": x, "right": x - box[0], "center": x - box[0] / 2}[xanchor]
    y0 = {"top": y, "bottom": y - box[1], "middle": y - box[1] / 2}[yanchor]
    return x0, y0, x0 + box[0], y0 + box[1]


def _spot_cost(rects: Sequence[Box], taken: Sequence[Sequence[Box]], height: float) -> float:
    """Return how badly a label's boxes (one per plot width) leave the plot or overlap what is there."""
    cost = 0.0
    for rect, width, boxes in zip(rects, PLOT_WIDTHS, taken, strict=True):
        outside = max(0.0, -rect[0]) + max(0.0, rect[2] - width) + max(0.0, -rect[1]) + max(0.0, rect[3] - height)
        cost += outside * 1000 + sum(overlap(rect, t) for t in boxes)
    return cost


def point_labels(fig: go.Figure, items: Sequence[tuple[list[str], float, float]],
                 ridge: tuple[float, float] | None, *, color_of: Callable[[str], str],
                 ridge_color: str) -> list[dict[str, Any]]:
    """Return annotations naming the predicted points (and the ridge), laid out so that no two texts overlap.

    ``items``: (variant names, x, y) per predicted point, in data units; ``color_of`` gives a name's colour,
    ``ridge_color`` the ridge label's. Points whose markers touch share one label listing their names. Each label
    goes to the nearest spot around its point that, at every plot width in ``PLOT_WIDTHS``, stays inside the plot
    and clear of the labels placed before, the markers and the 'none recorded' banner (else to the spot that
    overlaps least), with a thin leader line to its point.
    """
    height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    clusters = _clusters(items, fig)
    taken: list[list[Box]] = []
    for width in PLOT_WIDTHS:  # the banner and the markers themselves
        px = [to_px(fig, x, y, width) for _, x, y in clusters]
        taken.append(_banner_box(fig, width) + [(a - 8, b - 8, a + 8, b + 8) for a, b in px])
    todo = [(_label_text(n, color_of), x, y, "#444444", "point-label")
            for n, x, y in sorted(clusters, key=lambda c: c[1])]
    if ridge:  # last: the points' names get the nearest spots
        todo.append((f"ridge {ridge[0]:.0f} FLOP/B", ridge[0], ridge[1], ridge_color, "ridge"))
    out = []
    for text, x, y, color, name in todo:
        w, h = text_box(text, LABEL_FONT)
        anchors = [to_px(fig, x, y, width) for width in PLOT_WIDTHS]
        best = None
        for i, spot in enumerate(_SPOTS):
            rects = [spot_box(a, spot, (w + 6, h + 4)) for a in anchors]
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
            standoff=7, align="left", font=dict(size=LABEL_FONT, color=color),
            bgcolor="rgba(255, 255, 255, 0.85)", borderpad=2,
        ))
    return out
