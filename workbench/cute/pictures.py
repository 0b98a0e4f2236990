"""Pictures of CuTe layouts: the offset grid of a layout and the thread-value map of a TV layout (plotly)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.cute.algebra import Layout, LayoutError, Swizzle, SwizzledLayout

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["layout_picture", "swizzle_explorer", "tv_picture"]

MAX_TEXT_COLS = 32  # wider grids show offsets on hover only (JupyterLab's width)


def _size_fig(fig: go.Figure, rows: int, cols: int) -> None:
    cell = max(12, min(44, 820 // max(cols, 1)))
    m = fig.layout.margin
    fig.update_layout(width=min(940, cols * cell + 200), height=int(rows * cell + (m.t or 80) + (m.b or 60) + 40))
    fig.update_xaxes(side="top", showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False, scaleanchor="x", constrain="domain")


def layout_picture(layout: Layout | SwizzledLayout, title: str = "", *, color: str = "offset",
                   itemsize: int = 2) -> go.Figure:
    """Return a grid of CuTe's offsets of ``layout``: cell (i, j) shows and is coloured by the offset of (i, j).

    ``color="bank"`` colours each cell by the shared-memory bank of its element (``itemsize`` bytes each, 32 banks
    of 4 bytes) and labels it with the bank: a column read whose cells share a colour is a bank conflict.
    """
    import plotly.graph_objects as go

    from workbench import plots
    from workbench.cute import _grid, table

    if color not in ("offset", "bank"):
        raise LayoutError(f"wb.cute.layout_picture: color must be 'offset' or 'bank', got {color!r}")
    grid = table(layout)
    rows, cols = _grid(layout)
    bank = [[(o * itemsize // 4) % 32 for o in r] for r in grid]
    z = grid if color == "offset" else bank
    label = [[str(v) for v in r] for r in z] if cols <= MAX_TEXT_COLS else None
    hover = [[f"({i}, {j}) -> offset {grid[i][j]}, bank {bank[i][j]}" for j in range(cols)] for i in range(rows)]
    fig = go.Figure(go.Heatmap(z=z, text=label, texttemplate="%{text}" if label else None, textfont=dict(size=10),
                               customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                               colorscale="Turbo" if color == "bank" else "Viridis", xgap=1, ygap=1,
                               zmin=0 if color == "bank" else None, zmax=31 if color == "bank" else None,
                               colorbar=dict(title=dict(text=color), thickness=12, len=0.8)))
    head = title or f"{layout}"
    sub = (f"{rows}x{cols} coordinates, offsets 0..{max(max(r) for r in grid)} (CuTe's evaluation)"
           if color == "offset" else f"each cell's bank ({itemsize}-byte elements, 32 banks of 4 bytes)")
    what = "offset CuTe gives it" if color == "offset" else "bank it sits in (the same colour down a column: one bank)"
    shown = "the number is the" if label else "hover for the"
    plots._finish(fig, head, sub, [f"Row i (mode 0), column j (mode 1) is coordinate (i, j); {shown} {what}."], None)
    fig.update_yaxes(title_text="row i")
    _size_fig(fig, rows, cols)
    return fig


def _owners(tv: Layout, m: int, n: int) -> dict[tuple[int, int], list[tuple[int, int]]]:
    from workbench.cute import evaluate_many

    if tv.rank != 2:
        raise LayoutError(f"wb.cute.tv_picture: a TV layout has two modes (thread, value), got {tv}")
    # a layout's offset is the sum of its modes' offsets: CuTe evaluates each mode once, not every (t, v) pair
    thr, val = evaluate_many([tv.mode(0), tv.mode(1)])
    own: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for v, ov in enumerate(val):
        for t, ot in enumerate(thr):
            idx = ot + ov
            if idx >= m * n:
                raise LayoutError(f"wb.cute.tv_picture: {tv} sends thread {t}, value {v} to element {idx}, outside "
                                  f"the {m}x{n} tile")
            own.setdefault((idx % m, idx // m), []).append((t, v))
    return own


def tv_picture(tv: Layout, tile: tuple[int, int], title: str = "") -> go.Figure:
    """Return the (M, N) tile with each element labelled T#V# by the thread and value the TV layout gives it.

    ``tv`` maps (thread, value) to the column-major index m + M*n of the tile. Cells are coloured by thread; a cell
    many threads hold (a thread stride of 0: a broadcast operand) says how many.
    """
    import plotly.graph_objects as go

    from workbench import plots

    m, n = tile
    own = _owners(tv, m, n)
    nan = float("nan")
    z = [[nan] * n for _ in range(m)]
    label = [[""] * n for _ in range(m)]
    hover = [[f"({i}, {j}): no thread" for j in range(n)] for i in range(m)]
    for (i, j), who in own.items():
        t, v = who[0]
        z[i][j] = t
        label[i][j] = f"T{t}V{v}" if len(who) == 1 else f"×{len(who)}"
        hover[i][j] = (f"({i}, {j}): thread {t}, value {v}" if len(who) == 1 else
                       f"({i}, {j}): held by {len(who)} (thread, value) pairs, threads "
                       f"{min(w[0] for w in who)}..{max(w[0] for w in who)}")
    show = n <= 16 and m <= 64
    threads = tv.mode(0).size
    fig = go.Figure(go.Heatmap(z=z, text=label if show else None, texttemplate="%{text}" if show else None,
                               textfont=dict(size=9), customdata=hover,
                               hovertemplate="%{customdata}<extra></extra>", colorscale="Turbo", zmin=0,
                               zmax=max(threads - 1, 1), xgap=1, ygap=1,
                               colorbar=dict(title=dict(text="thread"), thickness=12, len=0.8)))
    missing = m * n - len(own)
    sub = f"TV layout {tv}: {threads} threads x {tv.size // threads} values over a {m}x{n} tile"
    notes = ["Row m, column n (ticks on top) is element m + M*n of the tile; its label is the thread and value that "
             "hold it."]
    if missing:
        notes.append(f"{missing} elements are held by no thread.")
    if not show:
        notes.append("Labels on hover (the tile is too wide to print them).")
    plots._finish(fig, title or "who holds which element", sub, notes, None)
    fig.update_yaxes(title_text="row m")
    _size_fig(fig, m, n)
    return fig


def swizzle_explorer(tile: Layout | None = None, *, m: int = 3, s: int = 3, bits: int = 0, itemsize: int = 2) -> Any:
    """Return a slider over B of ``Swizzle<B, m, s>`` on ``tile`` and the bank map of an ldmatrix.x4 down column 0.

    ``tile`` defaults to the 64x64 bf16 tile with 128-byte rows, ``(64,64):(64,1)``; B = 0 is no swizzle. The box
    exposes ``bits_slider``, ``figure`` (a ``FigureView``), ``info`` (the count) and ``count(b) -> BankCount``.
    """
    import ipywidgets as widgets

    from workbench.cute.banks import bank_count, bank_picture, ldmatrix
    from workbench.figure_view import FigureView

    tile = tile if tile is not None else Layout((64, 64), (64, 1))
    if not 0 <= bits <= s:
        raise LayoutError(f"wb.cute.swizzle_explorer: bits must be in [0, s] = [0, {s}], got {bits!r}")

    def request(b: int) -> Any:
        return ldmatrix(SwizzledLayout(Swizzle(b, m, s), tile), itemsize=itemsize)

    def figure(b: int) -> go.Figure:
        name = "no swizzle" if b == 0 else f"Swizzle<{b},{m},{s}>"
        return bank_picture(request(b), f"ldmatrix.x4 down column 0 of {tile}, {name}")

    fig = FigureView(figure(bits))
    slider = widgets.IntSlider(value=bits, min=0, max=s, step=1, description="B (bits)", continuous_update=False)
    info = widgets.HTML()

    def refresh(*_: Any) -> None:
        fig.redraw(figure(slider.value))
        b = slider.value
        name = "no swizzle" if b == 0 else f"Swizzle&lt;{b},{m},{s}&gt;"
        info.value = f"{name}: {bank_count(request(b))}"

    slider.observe(refresh, names="value")
    refresh()
    box = widgets.VBox([slider, info, fig])
    box.bits_slider, box.figure, box.info = slider, fig, info
    box.count = lambda b: bank_count(request(b))
    return box
