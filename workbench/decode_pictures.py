"""Draw decode attention's paged KV cache (notebook 06): a block table beside the page pool it points into.

:func:`block_table_figure` draws any ``decode_attention`` inputs' block table and seq_lens: on the left the table,
one row per sequence, each entry coloured by its sequence when the sequence uses it (its page id written in it) and
grey when it is junk past the sequence's last page (never to be read); on the right the pool, one row per page, each
slot coloured by the sequence whose token it holds (the token's index written in it) and grey when no sequence owns
it. :func:`allocate` plays a toy page allocator (prefill, then one token per sequence per decode step, a page taken
from a shuffled free list whenever a sequence's last page is full), and :func:`block_table_explorer` puts its state
under a decode-step slider. :func:`error_vs_bytes_figure` draws a quantized cache's error against its bytes (the
rows of ``kernels.decode_attention_q8.reference.error_vs_bytes``). Plotly and ipywidgets are imported here, not with
``workbench``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

__all__ = ["SEQ_COLORS", "allocate", "block_table_explorer", "block_table_figure", "error_vs_bytes_figure", "owners"]

#: One light colour per sequence (black text stays readable on each), cycled past twelve sequences.
SEQ_COLORS = list(qualitative.Set3)
_EMPTY = "#e6e6e6"  # junk table entries and slots no sequence owns
_MAX_TEXT_CELLS = 640  # past this many cells a panel's numbers would be too small to read: hover only


def _ints(x: Any, what: str, dims: int) -> list:
    """Return ``x`` (a tensor, an array or nested lists) as nested Python lists of ints, ``dims`` deep."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    try:
        rows = [list(r) for r in x] if dims == 2 else list(x)
        flat = [v for r in rows for v in r] if dims == 2 else rows
        if any(isinstance(v, bool) or int(v) != v for v in flat):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"block_table_figure: {what} must be a {dims}-D array of integers, got {x!r:.80}") from None
    return [[int(v) for v in r] for r in rows] if dims == 2 else [int(v) for v in rows]


def _check(table: list[list[int]], lens: list[int], n_pages: int, page: int) -> None:
    """Raise ValueError naming block_table_figure when the table, lengths and pool do not fit together."""
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise ValueError(f"block_table_figure: page must be an int >= 1, got {page!r}")
    if isinstance(n_pages, bool) or not isinstance(n_pages, int) or n_pages < 1:
        raise ValueError(f"block_table_figure: n_pages must be an int >= 1, got {n_pages!r}")
    if len(table) != len(lens) or len({len(r) for r in table}) > 1:
        raise ValueError(f"block_table_figure: block_table must be [B, maxp] with B = len(seq_lens) = {len(lens)} "
                         f"rows of one length, got rows of lengths {[len(r) for r in table]}")
    maxp = len(table[0]) if table else 0
    for b, (row, n) in enumerate(zip(table, lens, strict=True)):
        if not 0 <= n <= maxp * page:
            raise ValueError(f"block_table_figure: seq_lens[{b}] = {n} must be in [0, maxp * page = {maxp * page}]")
        bad = [p for p in row[:-(-n // page)] if not 0 <= p < n_pages]
        if bad:
            raise ValueError(f"block_table_figure: sequence {b} uses page ids {bad} outside the pool [0, {n_pages})")


def owners(block_table: Any, seq_lens: Any, n_pages: int, page: int) -> list[list[tuple[int, int] | None]]:
    """Return the pool's ownership: ``[n_pages][page]``, each slot ``(sequence, token)`` or None (no owner).

    Token t of sequence b lives in page ``block_table[b][t // page]``, slot ``t % page``; a slot claimed twice
    raises ValueError (two sequences sharing a page is a prefix cache, which this contract does not have).
    """
    table, lens = _ints(block_table, "block_table", 2), _ints(seq_lens, "seq_lens", 1)
    _check(table, lens, n_pages, page)
    pool: list[list[tuple[int, int] | None]] = [[None] * page for _ in range(n_pages)]
    for b, n in enumerate(lens):
        for t in range(n):
            p, s = table[b][t // page], t % page
            if pool[p][s] is not None:
                raise ValueError(f"block_table_figure: page {p} slot {s} is claimed by sequence {pool[p][s][0]} and "
                                 f"sequence {b}")
            pool[p][s] = (b, t)
    return pool


def _colorscale(n_seq: int) -> list[list[Any]]:
    """Return a stepped colour scale: value -1 grey, value b the colour of sequence b (zmin -1.5, zmax n - 0.5)."""
    colors = [_EMPTY] + [SEQ_COLORS[b % len(SEQ_COLORS)] for b in range(n_seq)]
    n = len(colors)
    return [[(i + k) / n, c] for i, c in enumerate(colors) for k in (0, 1)]


def _table_cells(table: list[list[int]], lens: list[int], page: int) -> tuple[list, list, list]:
    """Return (z, text, hover) of the block-table panel."""
    z, text, hover = [], [], []
    for b, (row, n) in enumerate(zip(table, lens, strict=True)):
        used = -(-n // page)
        z.append([b if j < used else -1 for j in range(len(row))])
        text.append([str(p) for p in row])
        hover.append([f"sequence {b}, entry {j}: page {p} holds tokens {j * page}..{min(n, (j + 1) * page) - 1}"
                      if j < used else f"sequence {b}, entry {j}: junk {p} past its {used} page(s), never read"
                      for j, p in enumerate(row)])
    return z, text, hover


def _pool_cells(pool: list[list[tuple[int, int] | None]]) -> tuple[list, list, list]:
    """Return (z, text, hover) of the page-pool panel."""
    z = [[-1 if o is None else o[0] for o in row] for row in pool]
    text = [["" if o is None else f"t{o[1]}" for o in row] for row in pool]
    hover = [[f"page {p}, slot {s}: " + ("no owner (NaN in the checker's inputs)" if o is None
                                         else f"sequence {o[0]}, token {o[1]}") for s, o in enumerate(row)]
             for p, row in enumerate(pool)]
    return z, text, hover


def _heatmap(z: list, text: list, hover: list, x: list, y: list, n_seq: int) -> go.Heatmap:
    cells = sum(len(r) for r in z)
    return go.Heatmap(z=z, x=x, y=y, text=text, hovertext=hover, hoverinfo="text", colorscale=_colorscale(n_seq),
                      zmin=-1.5, zmax=n_seq - 0.5, showscale=False, xgap=2, ygap=2,
                      texttemplate="%{text}" if cells <= _MAX_TEXT_CELLS else "", textfont={"size": 11})


def block_table_figure(block_table: Any, seq_lens: Any, n_pages: int, page: int, *,
                       title: str | None = None) -> go.Figure:
    """Return a figure of a block table (left) beside the page pool it points into (right).

    ``block_table`` [B, maxp] and ``seq_lens`` [B] are decode_attention's (tensors or lists), ``n_pages`` and
    ``page`` the cache's first two dims. Left: entry j of sequence b, coloured by b and showing its page id when the
    sequence uses it, grey (its junk value shown) when it lies past the sequence's last page. Right: every page's
    slots, coloured by the sequence whose token they hold and labelled ``t<token>``; grey slots belong to no one.
    One legend entry per sequence gives its length. Hover over a cell for the details.
    """
    table, lens = _ints(block_table, "block_table", 2), _ints(seq_lens, "seq_lens", 1)
    pool = owners(table, lens, n_pages, page)
    n_seq, maxp = len(lens), (len(table[0]) if table else 0)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.45, 0.55], horizontal_spacing=0.12,
                        subplot_titles=(f"block table [{n_seq}, {maxp}]: entry → page id",
                                        f"page pool: {n_pages} pages × {page} slots"))
    seqs = [f"seq {b}" for b in range(n_seq)]
    fig.add_trace(_heatmap(*_table_cells(table, lens, page), list(range(maxp)), seqs, n_seq), row=1, col=1)
    fig.add_trace(_heatmap(*_pool_cells(pool), list(range(page)), [f"page {p}" for p in range(n_pages)], n_seq),
                  row=1, col=2)
    for b, n in enumerate(lens):  # legend only: the colour of each sequence and its length
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"seq {b}: {n} tokens",
                                 marker={"symbol": "square", "size": 12, "color": SEQ_COLORS[b % len(SEQ_COLORS)]}),
                      row=1, col=1)
    rows = max(n_seq, n_pages)
    fig.update_xaxes(title_text="entry j (tokens j·page ...)", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="slot", dtick=1, row=1, col=2)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(title=title or "Paged KV cache: who owns which page (grey: junk entries, unowned slots)",
                      height=max(320, 170 + 19 * rows), plot_bgcolor="white", margin={"t": 80, "b": 60, "r": 150},
                      legend={"x": 1.02, "y": 1, "font": {"size": 11}}, meta={"owned_slots": sum(lens)})
    return fig


# ---------------------------------------------------------------------------------------------------------
# a toy allocator, and the slider over its decode steps


def _positive(name: str, v: Any, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"allocate: {name} must be an int >= {low}, got {v!r}")
    return v


def allocate(prompt_lens: Sequence[int], steps: int, page: int, n_pages: int, seed: int = 0,
             maxp: int | None = None) -> tuple[list[list[int]], list[int]]:
    """Return (block_table, seq_lens) after a prefill of ``prompt_lens`` and ``steps`` decode steps.

    The free list is ``range(n_pages)`` shuffled with ``seed``. Prefill gives each sequence, in order, the pages its
    prompt needs; each decode step then adds one token to every sequence in order, and a sequence whose last page
    is full takes the next free page. Entries past a sequence's pages are -1 (free). ``maxp`` (default: what the
    longest sequence needs) fixes the table's width. Runs out of pages: ValueError (a server would preempt).
    """
    page, n_pages, steps = _positive("page", page, 1), _positive("n_pages", n_pages, 1), _positive("steps", steps, 0)
    lens = [_positive("each prompt length", n, 1) for n in prompt_lens]
    free = list(range(n_pages))
    random.Random(seed).shuffle(free)
    pages: list[list[int]] = [[] for _ in lens]

    def grow(b: int, n: int, when: str) -> None:
        while len(pages[b]) * page < n:
            if not free:
                raise ValueError(f"allocate: the pool of {n_pages} pages is full {when} (sequence {b} needs a page)")
            pages[b].append(free.pop())

    for b, n in enumerate(lens):
        grow(b, n, "at prefill")
    for k in range(steps):
        for b in range(len(lens)):
            lens[b] += 1
            grow(b, lens[b], f"at decode step {k + 1}")
    width = max([len(p) for p in pages] + [1]) if maxp is None else maxp
    if any(len(p) > width for p in pages):
        raise ValueError(f"allocate: maxp = {maxp} entries cannot hold {max(len(p) for p in pages)} pages")
    return [p + [-1] * (width - len(p)) for p in pages], lens


def block_table_explorer(prompt_lens: Sequence[int] = (6, 1, 9), page: int = 4, n_pages: int = 12,
                         max_steps: int = 8, seed: int = 0, step: int = 3) -> Any:
    """Return a decode-step slider over :func:`allocate`'s block table and pool (an ``ipywidgets.VBox``).

    Moving the slider redraws the :func:`block_table_figure` in place: a sequence takes a new page every ``page``
    steps, from anywhere in the pool. The box exposes ``step_slider``, ``figure`` (a ``FigureView``), ``info`` and
    ``state(step) -> (block_table, seq_lens)``.
    """
    import ipywidgets as widgets

    from workbench.figure_view import FigureView

    final, _ = allocate(prompt_lens, max_steps, page, n_pages, seed)  # the widest table any step needs
    maxp = len(final[0]) if final else 1
    if not 0 <= step <= max_steps:
        raise ValueError(f"block_table_explorer: step must be in [0, max_steps = {max_steps}], got {step!r}")

    def state(k: int) -> tuple[list[list[int]], list[int]]:
        return allocate(prompt_lens, k, page, n_pages, seed, maxp=maxp)

    def figure(k: int) -> go.Figure:
        return block_table_figure(*state(k), n_pages, page,
                                  title=f"After prefill and {k} decode step(s): each sequence's pages")

    fig = FigureView(figure(step))
    slider = widgets.IntSlider(value=step, min=0, max=max_steps, step=1, description="decode steps",
                               continuous_update=False)
    info = widgets.HTML()

    def refresh(*_: Any) -> None:
        table, lens = state(slider.value)
        fig.redraw(figure(slider.value))
        used = sum(-(-n // page) for n in lens)
        idle = used * page - sum(lens)
        info.value = (f"lengths {lens}: {used} of {n_pages} pages in use; {idle} allocated slots still empty "
                      f"(at most page - 1 = {page - 1} per sequence: paging wastes only the last page's tail)")

    slider.observe(refresh, names="value")
    refresh()
    box = widgets.VBox([slider, info, fig])
    box.step_slider, box.figure, box.info, box.state = slider, fig, info, state
    return box


# ---------------------------------------------------------------------------------------------------------
# the quantized cache: error against bytes

_STUDY_KEYS = ("format", "kv_bytes_per_token_head", "rms_err", "max_abs_err")


def _side_by_side(xs: list[float], gap: float) -> list[float]:
    """Return ``xs`` with the points that share an x spread ``gap`` apart around it (so they do not hide each other)."""
    out = []
    for i, x in enumerate(xs):
        same = [j for j, y in enumerate(xs) if y == x]
        out.append(x + (same.index(i) - (len(same) - 1) / 2) * gap)
    return out


def error_vs_bytes_figure(rows: Sequence[dict], *, title: str | None = None) -> go.Figure:
    """Return a figure of each cache format's attention error (log scale) against its bytes per token and KV head.

    ``rows`` are ``error_vs_bytes``' (``kernels/decode_attention_q8/reference.py``): ``format``,
    ``kv_bytes_per_token_head`` (K and V of one token and KV head, scales included), ``rms_err`` and
    ``max_abs_err`` of the attention output against the float64 attention over the unquantized cache. Each format is
    one colour: a filled marker at its RMS error, an open one at its largest error, joined. Formats with the same
    bytes are drawn a little apart (the hover gives the exact bytes); a zero error sits at the axis floor.
    """
    rows = list(rows)
    bad = [r for r in rows if not isinstance(r, dict) or any(k not in r for k in _STUDY_KEYS)]
    if not rows or bad:
        raise ValueError(f"error_vs_bytes_figure: expected error_vs_bytes rows with keys {list(_STUDY_KEYS)}, "
                         f"got {bad[0] if bad else rows!r:.120}")
    floor = min([r[k] for r in rows for k in ("rms_err", "max_abs_err") if r[k] > 0] + [1e-8]) / 2
    raw = [float(r["kv_bytes_per_token_head"]) for r in rows]
    span = (max(raw) - min(raw)) or max(raw)
    xs = _side_by_side(raw, 0.04 * span)
    fig = go.Figure()
    for i, (r, x) in enumerate(zip(rows, xs, strict=True)):
        color = qualitative.D3[i % len(qualitative.D3)]
        ys = [max(r["rms_err"], floor), max(r["max_abs_err"], floor)]
        hover = [f"{r['format']}: {r['kv_bytes_per_token_head']:g} B per token and KV head, {what} {r[k]:.2e}"
                 for what, k in (("RMS error", "rms_err"), ("largest error", "max_abs_err"))]
        fig.add_trace(go.Scatter(x=[x, x], y=ys, name=r["format"], mode="lines+markers", hovertext=hover,
                                 hoverinfo="text", line={"color": color, "width": 1},
                                 marker={"symbol": ["circle", "circle-open"], "size": 11, "color": color}))
    fig.update_layout(title=title or "Attention error against KV-cache bytes (vs float64 on the unquantized cache)",
                      xaxis={"title": "bytes per token and KV head (K + V, scales included)",
                             "range": [min(raw) - 0.3 * span, max(raw) + 0.3 * span]},
                      yaxis={"title": "|error|: RMS (filled), largest (open)", "type": "log"}, height=380,
                      legend={"title": {"text": "cache format"}})
    return fig
