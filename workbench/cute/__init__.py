"""CuTe layouts you can run and see: ``wb.cute``.

Every function here asks CuTe itself (``nvidia-cutlass-dsl``, the CuTe DSL) for its answer: it traces a host-only
``@cute.jit`` function that builds the layouts and evaluates them, which needs no GPU, and returns plain
:class:`Layout` values (shape and stride tuples, the same algebra re-written in :mod:`workbench.cute.algebra`,
which the tests use to cross-check CuTe). On top of that:

* ``layout_picture(L)``: a grid of a layout's offsets; ``tv_picture(tv, tile)``: which thread owns which element;
* ``mma_tv("sm80_16x8x16")``/``mma_tv("sm90_64x64x16")``: the thread-value layouts of CuTe's MMA atoms, tiled;
* ``ldmatrix``/``cp_async``/``wgmma_read`` requests on a shared-memory layout (optionally swizzled), counted with
  the 32-bank, 4-byte model ``wb.profile`` uses (``bank_count``) and drawn as its bank map (``bank_picture``).

``import workbench`` does not import cutlass; the first call here does (about a second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.cute import algebra
from workbench.cute.algebra import Layout, LayoutError, Swizzle, SwizzledLayout

__all__ = ["BankCount", "Layout", "LayoutError", "Swizzle", "SwizzledLayout", "TiledCopy", "TiledMMA", "algebra",
           "bank_count", "bank_picture", "blocked_product", "coalesce", "complement", "composition", "copy_tv",
           "cp_async", "evaluate", "evaluate_many", "layout_picture", "ldmatrix", "local_partition", "local_tile",
           "logical_divide", "logical_product", "make_layout", "mma_tv", "raked_product", "request", "swizzle",
           "swizzle_explorer", "table", "try_answer", "tv_picture", "wgmma_read", "zipped_divide"]

AnyLayout = Layout | SwizzledLayout


# ------------------------------------------------------------------------------------------ to and from CuTe
def _cute() -> Any:
    import cutlass.cute as cute

    return cute


def _mk(x: Any) -> Any:
    """Return a CuTe layout (inside a trace) for a Layout, a SwizzledLayout, an int, or a tuple tiler of them."""
    cute = _cute()
    if isinstance(x, SwizzledLayout):
        sw = x.swizzle
        return cute.make_composed_layout(cute.make_swizzle(sw.b, sw.m, sw.s), 0, _mk(x.layout))
    if isinstance(x, Layout):
        return cute.make_layout(x.shape, stride=x.stride)
    if isinstance(x, (tuple, list)):
        return tuple(_mk(e) if isinstance(e, Layout) else e for e in x)
    return x


def _back(cl: Any) -> Layout:
    from workbench.cute._jit import to_py

    return Layout(to_py(cl.shape), to_py(cl.stride))


def _cute_op(name: str, fn: Any) -> Any:
    from workbench.cute import _jit

    try:
        return _jit.run(fn)
    except (LayoutError, ImportError):
        raise
    except Exception as e:  # CuTe's own message is long: keep its first lines
        msg = str(e).strip().splitlines()
        raise LayoutError(f"wb.cute.{name}: CuTe rejected it: {' '.join(m.strip() for m in msg[:4])}") from e


def _check(x: Any, what: str, name: str) -> None:
    if not isinstance(x, (Layout, SwizzledLayout)):
        raise LayoutError(f"wb.cute.{name}: {what} must be a wb.cute.Layout (make one with wb.cute.make_layout("
                          f"shape, stride)), got {type(x).__name__}")


# ------------------------------------------------------------------------------------------ layout algebra
def make_layout(shape: Any, stride: Any = None) -> Layout:
    """Return CuTe's layout of ``shape`` (column-major, CuTe's default, unless ``stride`` is given)."""
    def job() -> Layout:
        cute = _cute()
        return _back(cute.make_layout(shape) if stride is None else cute.make_layout(shape, stride=stride))
    if stride is not None:
        Layout(shape, stride)  # a clear error for incongruent shape and stride before CuTe's
    return _cute_op("make_layout", job)


def coalesce(layout: Layout) -> Layout:
    """Return CuTe's coalesce: the fewest modes mapping each 1-D index to the same offset."""
    _check(layout, "layout", "coalesce")
    return _cute_op("coalesce", lambda: _back(_cute().coalesce(_mk(layout))))


def composition(a: Layout, b: Any) -> Layout:
    """Return CuTe's ``a o b`` (offset at c = a(b(c))); ``b`` a Layout, or a tuple tiler composed mode by mode."""
    _check(a, "a", "composition")
    return _cute_op("composition", lambda: _back(_cute().composition(_mk(a), _mk(b))))


def complement(a: Layout, cotarget: int) -> Layout:
    """Return CuTe's complement of ``a`` up to ``cotarget``: the offsets ``a`` leaves out, as a layout."""
    _check(a, "a", "complement")
    return _cute_op("complement", lambda: _back(_cute().complement(_mk(a), cotarget)))


def logical_divide(a: Layout, tiler: Any) -> Layout:
    """Return CuTe's logical_divide: ``a`` split into (tile, rest), by mode when ``tiler`` is a tuple."""
    _check(a, "a", "logical_divide")
    return _cute_op("logical_divide", lambda: _back(_cute().logical_divide(_mk(a), _mk(tiler))))


def zipped_divide(a: Layout, tiler: Any) -> Layout:
    """Return CuTe's zipped_divide: ((the tile's modes), (the tiles' grid)) of ``a`` divided by ``tiler``."""
    _check(a, "a", "zipped_divide")
    return _cute_op("zipped_divide", lambda: _back(_cute().zipped_divide(_mk(a), _mk(tiler))))


def logical_product(a: Layout, b: Layout) -> Layout:
    """Return CuTe's logical_product: (a, the copies of a that b lays out)."""
    _check(a, "a", "logical_product")
    _check(b, "b", "logical_product")
    return _cute_op("logical_product", lambda: _back(_cute().logical_product(_mk(a), _mk(b))))


def blocked_product(a: Layout, b: Layout) -> Layout:
    """Return CuTe's blocked_product: copies of ``a`` as whole blocks, arranged by ``b``."""
    _check(a, "a", "blocked_product")
    _check(b, "b", "blocked_product")
    return _cute_op("blocked_product", lambda: _back(_cute().blocked_product(_mk(a), _mk(b))))


def raked_product(a: Layout, b: Layout) -> Layout:
    """Return CuTe's raked_product: copies of ``a`` interleaved across the tile, ``b``'s pattern innermost."""
    _check(a, "a", "raked_product")
    _check(b, "b", "raked_product")
    return _cute_op("raked_product", lambda: _back(_cute().raked_product(_mk(a), _mk(b))))


def local_tile(layout: Layout, tiler: Sequence[int], coord: Sequence[int]) -> tuple[Layout, int]:
    """Return (tile layout, first offset) of tile ``coord`` when CuTe cuts ``layout`` into ``tiler`` tiles."""
    _check(layout, "layout", "local_tile")
    tiles = [-(-algebra.size(m.shape) // t) for m, t in zip(layout.modes(), tiler, strict=False)]
    if len(coord) != len(tiler) or len(tiler) > layout.rank or any(
            not 0 <= c < n for c, n in zip(coord, tiles, strict=True)):
        raise LayoutError(f"wb.cute.local_tile: tile coordinate {tuple(coord)} is outside the "
                          f"{'x'.join(map(str, tiles))} tiles of {tuple(tiler)} that cover {layout}")

    def job() -> tuple[Layout, int]:
        cute = _cute()
        t = cute.local_tile(cute.make_tensor(0, _mk(layout)), tuple(tiler), tuple(coord))
        return _back(t.layout), int(t.iterator)
    return _cute_op("local_tile", job)


def local_partition(layout: Layout, threads: Layout, index: int) -> tuple[Layout, int]:
    """Return (layout, first offset) of the elements CuTe's local_partition gives thread ``index`` of ``threads``."""
    _check(layout, "layout", "local_partition")
    _check(threads, "threads", "local_partition")
    if not 0 <= index < threads.size:
        raise LayoutError(f"wb.cute.local_partition: index {index} is outside the {threads.size} threads of "
                          f"{threads}")

    def job() -> tuple[Layout, int]:
        import cutlass

        cute = _cute()
        t = cute.local_partition(cute.make_tensor(0, _mk(layout)), _mk(threads), cutlass.Int32(index))
        return _back(t.layout), int(t.iterator)
    return _cute_op("local_partition", job)


def swizzle(b: int, m: int, s: int) -> Swizzle:
    """Return ``Swizzle<b, m, s>`` (xor bits [m+s, m+s+b) into [m, m+b)), checked against CuTe's own."""
    sw = Swizzle(b, m, s)

    def job() -> str:
        return str(_cute().make_swizzle(b, m, s))
    got = _cute_op("swizzle", job)
    if b and got != str(sw):
        raise LayoutError(f"wb.cute.swizzle: CuTe made {got} for Swizzle<{b},{m},{s}>")
    return sw


def evaluate(layout: AnyLayout) -> list[int]:
    """Return CuTe's offsets of indices 0 .. size-1 of ``layout`` (a swizzled one included)."""
    return evaluate_many([layout])[0]


def evaluate_many(layouts: Sequence[AnyLayout]) -> list[list[int]]:
    """Return CuTe's offsets of each layout, all in one trace (quicker than one evaluate each)."""
    for x in layouts:
        _check(x, "each layout", "evaluate_many")
    todo = [x for x in dict.fromkeys(layouts) if x not in _EVALUATED]

    def job() -> list[list[int]]:
        out = []
        for x in todo:
            c = _mk(x)
            out.append([int(c(i)) for i in range(x.size)])
        return out
    if todo:
        if len(_EVALUATED) > 256:
            _EVALUATED.clear()
        _EVALUATED.update(zip(todo, _cute_op("evaluate", job), strict=True))
    return [list(_EVALUATED[x]) for x in layouts]


_EVALUATED: dict[AnyLayout, list[int]] = {}  # CuTe's offsets of layouts already evaluated (layouts are immutable)


def table(layout: AnyLayout) -> list[list[int]]:
    """Return CuTe's offsets as a grid: row i, column j holds the offset of coordinate (i, j) (rank 1: one row)."""
    rows, cols = _grid(layout)
    flat = evaluate(layout)
    return [[flat[i + rows * j] for j in range(cols)] for i in range(rows)]


def _grid(layout: AnyLayout) -> tuple[int, int]:
    if layout.rank == 1:
        return 1, layout.size
    rows = algebra.size(layout.mode(0).shape)
    return rows, layout.size // rows


# ------------------------------------------------------------------------------------------ MMA atoms
@dataclass(frozen=True)
class TiledMMA:
    """The thread-value layouts of a tiled MMA, read from CuTe.

    ``tv_a`` maps (thread, value) to an element of the (M, K) A tile (column-major index m + M*k), ``tv_b`` of the
    (N, K) B tile, ``tv_c`` of the (M, N) accumulator tile. ``atom`` is the MMA instruction's (M, N, K), ``tile``
    the tiled MMA's, ``threads`` how many threads take part.
    """

    name: str
    atom: tuple[int, int, int]
    tile: tuple[int, int, int]
    threads: int
    tv_a: Layout
    tv_b: Layout
    tv_c: Layout
    text: str

    def __str__(self) -> str:
        return self.text


_ATOMS = {"sm80_16x8x16": ("sm_80", None), "sm90_64x64x16": ("sm_90a", 64), "sm90_64x128x16": ("sm_90a", 128),
          "sm90_64x256x16": ("sm_90a", 256), "sm90_64x16x16": ("sm_90a", 16), "sm90_64x8x16": ("sm_90a", 8)}


def _make_op(name: str, a_from_registers: bool) -> Any:
    import cutlass
    import cutlass.cute.nvgpu as nvgpu
    from cutlass.cute.nvgpu import warp, warpgroup

    n = _ATOMS[name][1]
    if n is None:
        return warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16))
    src = warpgroup.OperandSource.RMEM if a_from_registers else warpgroup.OperandSource.SMEM
    return warpgroup.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (64, n, 16), src, nvgpu.OperandMajorMode.K,
                                  nvgpu.OperandMajorMode.K)


def mma_tv(atom: str = "sm80_16x8x16", atom_layout: tuple[int, int, int] = (1, 1, 1), *,
           a_from_registers: bool = False) -> TiledMMA:
    """Return the TV layouts of CuTe's bf16 MMA ``atom`` repeated ``atom_layout`` times over (M, N, K).

    ``"sm80_16x8x16"``: the warp-wide ``mma.sync.m16n8k16`` (32 threads). ``"sm90_64xNx16"`` (N = 8, 16, 64, 128,
    256): the warpgroup ``wgmma`` (128 threads); its A and B are read from shared memory through a descriptor, so
    their TV layouts give every thread the whole tile (thread stride 0) unless ``a_from_registers`` puts A in
    registers.
    """
    if atom not in _ATOMS:
        raise LayoutError(f"wb.cute.mma_tv: unknown atom {atom!r}; known: {', '.join(_ATOMS)}")
    if len(atom_layout) != 3 or any(not isinstance(x, int) or x < 1 for x in atom_layout):
        raise LayoutError(f"wb.cute.mma_tv: atom_layout must be three ints >= 1 (atoms along M, N, K), got "
                          f"{atom_layout!r}")

    def job() -> TiledMMA:
        cute = _cute()
        tm = cute.make_tiled_mma(_make_op(atom, a_from_registers), atom_layout)
        from workbench.cute._jit import to_py

        shape = to_py(tm.shape_mnk)
        tile = tuple(s * k for s, k in zip(shape, atom_layout, strict=True))
        return TiledMMA(atom, shape, tile, int(cute.size(tm.thr_layout_vmnk)), _back(tm.tv_layout_A_tiled),
                        _back(tm.tv_layout_B_tiled), _back(tm.tv_layout_C_tiled), str(tm))

    from workbench.cute import _jit

    try:
        return _jit.run(job, arch=_ATOMS[atom][0])
    except (LayoutError, ImportError):
        raise
    except Exception as e:
        raise LayoutError(f"wb.cute.mma_tv({atom!r}): CuTe rejected it: {str(e).strip().splitlines()[:3]}") from e


@dataclass(frozen=True)
class TiledCopy:
    """The thread-value layouts of a tiled copy, read from CuTe.

    ``tv_src`` maps (thread, value) to the element of the tile (column-major index) the thread reads, ``tv_dst`` to
    the element it ends up holding; ``tile`` is the (M, K) tile the copy covers.
    """

    name: str
    tile: tuple[int, int]
    threads: int
    tv_src: Layout
    tv_dst: Layout


_COPIES = {"sm80_ldmatrix_x4_A": "the A operand of mma.sync m16n8k16, loaded by ldmatrix.x4 (bf16)"}


def copy_tv(copy: str = "sm80_ldmatrix_x4_A") -> TiledCopy:
    """Return the TV layouts of CuTe's TiledCopy ``copy``: ``"sm80_ldmatrix_x4_A"`` is ``make_tiled_copy_A`` of an
    ldmatrix.x4 copy atom for the SM80 bf16 mma.sync m16n8k16 (who gives which row address, who receives what)."""
    if copy not in _COPIES:
        raise LayoutError(f"wb.cute.copy_tv: unknown copy {copy!r}; known: {', '.join(_COPIES)}")

    def job() -> TiledCopy:
        import cutlass
        from cutlass.cute.nvgpu import warp

        cute = _cute()
        atom = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), cutlass.BFloat16)
        mma = cute.make_tiled_mma(_make_op("sm80_16x8x16", False))
        tc = cute.make_tiled_copy_A(atom, mma)
        from workbench.cute._jit import to_py

        tile = tuple(to_py(cute.size(t)) for t in tc.tiler_mn)
        return TiledCopy(copy, tile, int(tc.size), _back(tc.layout_src_tv_tiled), _back(tc.layout_dst_tv_tiled))

    from workbench.cute import _jit

    try:
        return _jit.run(job, arch="sm_80")
    except (LayoutError, ImportError):
        raise
    except Exception as e:
        raise LayoutError(f"wb.cute.copy_tv({copy!r}): CuTe rejected it: {str(e).strip().splitlines()[:3]}") from e


# ------------------------------------------------------------------------------------------ the exercises
def try_answer(drill_id: str, fn: Any) -> str:
    """Return the verdict of a CuTe exercise on ``fn`` without recording an attempt or showing the model answer.

    ``d.submit(fn)`` is the recorded attempt (``wb.progress()`` counts it), and a failed one shows the model answer;
    this gives only the check's verdict: the first input where ``fn`` differs, and the classic mistake it makes.
    """
    from workbench.practice import drill

    d = drill(drill_id)
    if getattr(d, "form", None) != "code":
        raise LayoutError(f"wb.cute.try_answer: {drill_id!r} is not a concept-as-code drill (a function to write)")
    return d._grade_code(fn).feedback


# ------------------------------------------------------------------------------------------ pictures and banks
from workbench.cute.banks import (  # noqa: E402
    BankCount,
    bank_count,
    bank_picture,
    cp_async,
    ldmatrix,
    request,
    wgmma_read,
)
from workbench.cute.pictures import layout_picture, swizzle_explorer, tv_picture  # noqa: E402
