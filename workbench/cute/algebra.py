"""A small pure-Python CuTe layout algebra: the cross-check for what ``wb.cute`` asks CuTe itself to compute.

A layout is a shape and a stride, congruent hierarchical tuples of ints; it maps a coordinate (or a 1-D index,
split colexicographically: the leftmost mode varies fastest) to an offset, the inner product of the coordinate and
the stride. The functions here follow CuTe's definitions (coalesce, composition, complement, the divides and the
products, local_tile and local_partition) and are written from them, not from CuTe's code. They cover static
layouts with non-negative integer strides: enough to check CuTe's answers in the tests and to serve the
notebook's exercises; ``wb.cute``'s functions of the same names are the ones to use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

__all__ = ["Layout", "Swizzle", "SwizzledLayout", "blocked_product", "coalesce", "complement", "composition",
           "crd2idx", "flatten", "local_partition", "local_tile", "logical_divide", "logical_product",
           "raked_product", "size", "zipped_divide"]

IntTuple = int | tuple


class LayoutError(ValueError):
    """A layout operation got arguments CuTe's algebra does not define (the message says which and why)."""


def flatten(t: IntTuple) -> tuple[int, ...]:
    """Return the leaves of a hierarchical tuple, left to right."""
    if isinstance(t, tuple):
        return tuple(x for e in t for x in flatten(e))
    return (t,)


def size(t: IntTuple) -> int:
    """Return the number of coordinates a shape holds: the product of its leaves."""
    return prod(flatten(t))


def _check_congruent(shape: IntTuple, stride: IntTuple) -> None:
    if isinstance(shape, tuple) != isinstance(stride, tuple) or (
            isinstance(shape, tuple) and len(shape) != len(stride)):
        raise LayoutError(f"layout: shape {_fmt(shape)} and stride {_fmt(stride)} must be congruent (the same "
                          "nesting of tuples)")
    if isinstance(shape, tuple):
        for s, d in zip(shape, stride, strict=True):
            _check_congruent(s, d)
    elif not (isinstance(shape, int) and shape >= 1 and isinstance(stride, int)):
        raise LayoutError(f"layout: a shape leaf must be an int >= 1 and a stride leaf an int (got {shape!r}:"
                          f"{stride!r})")


def crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple) -> int:
    """Return the offset of ``coord`` (a congruent coordinate, or an int split colexicographically over shape)."""
    if isinstance(coord, tuple):
        if not isinstance(shape, tuple) or len(coord) != len(shape):
            raise LayoutError(f"coordinate {_fmt(coord)} does not match shape {_fmt(shape)}")
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride, strict=True))
    if isinstance(shape, tuple):  # an int coordinate over a tuple shape: colexicographic, the last mode takes the rest
        out = 0
        for i, (s, d) in enumerate(zip(shape, stride, strict=True)):
            n = size(s)
            last = i == len(shape) - 1
            out += crd2idx(coord if last else coord % n, s, d)
            coord //= n
        return out
    return coord * stride


def _fmt(t: Any) -> str:
    if isinstance(t, tuple):
        return "(" + ",".join(_fmt(x) for x in t) + ")"
    return str(t)


@dataclass(frozen=True)
class Layout:
    """A CuTe layout ``shape:stride`` (hierarchical int tuples); calling it maps a coordinate or index to an offset."""

    shape: IntTuple
    stride: IntTuple

    def __post_init__(self) -> None:
        _check_congruent(self.shape, self.stride)

    def __call__(self, *coord: IntTuple) -> int:
        """Return the offset of a coordinate (``L(1, 2)``, ``L((1, 2))``) or a 1-D index (``L(5)``)."""
        c = coord[0] if len(coord) == 1 else tuple(coord)
        return crd2idx(c, self.shape, self.stride)

    def __str__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    def __repr__(self) -> str:
        return f"Layout({self})"

    @property
    def size(self) -> int:
        """Return the number of coordinates."""
        return size(self.shape)

    @property
    def rank(self) -> int:
        """Return the number of top-level modes."""
        return len(self.shape) if isinstance(self.shape, tuple) else 1

    @property
    def cosize(self) -> int:
        """Return one past the largest offset (the memory the layout spans, in elements)."""
        return max(self(i) for i in range(self.size)) + 1 if self.size else 0

    def mode(self, i: int) -> Layout:
        """Return top-level mode ``i`` as a layout of its own."""
        if not isinstance(self.shape, tuple):
            if i != 0:
                raise LayoutError(f"layout {self} has one mode; mode {i} does not exist")
            return self
        return Layout(self.shape[i], self.stride[i])

    def modes(self) -> list[Layout]:
        """Return the top-level modes."""
        return [self.mode(i) for i in range(self.rank)]

    def offsets(self) -> list[int]:
        """Return the offsets of indices 0 .. size-1 (pure Python)."""
        return [self(i) for i in range(self.size)]


def make_layout(*modes: Layout) -> Layout:
    """Return the layout whose top-level modes are ``modes`` (concatenation)."""
    return Layout(tuple(m.shape for m in modes), tuple(m.stride for m in modes))


def _as_layout(x: Layout | int) -> Layout:
    return x if isinstance(x, Layout) else Layout(int(x), 1)


def _flat_modes(a: Layout) -> list[tuple[int, int]]:
    return list(zip(flatten(a.shape), flatten(a.stride), strict=True))


def _from_modes(modes: list[tuple[int, int]]) -> Layout:
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def coalesce(a: Layout) -> Layout:
    """Return the layout with the fewest modes that maps each index as ``a`` does (flattened, merged)."""
    out: list[tuple[int, int]] = []
    for s, d in _flat_modes(a):
        if s == 1:
            continue
        if out and out[-1][0] * out[-1][1] == d:
            out[-1] = (out[-1][0] * s, out[-1][1])
        else:
            out.append((s, d))
    return _from_modes(out)


def complement(a: Layout, cotarget: int) -> Layout:
    """Return the layout of the offsets below ``cotarget`` that ``a`` does not reach, ordered by stride."""
    modes = sorted((d, s) for s, d in _flat_modes(a) if s != 1 and d != 0)
    out: list[tuple[int, int]] = []
    current = 1
    for d, s in modes:
        if d % current:
            raise LayoutError(f"complement({a}, {cotarget}): stride {d} is not a multiple of {current}, so the "
                              "layout is not injective in a way complement can fill")
        out.append((d // current, current))
        current = s * d
    out.append((-(-cotarget // current), current))
    return coalesce(_from_modes(out))


def _compose_mode(a: Layout, s: int, d: int) -> Layout:
    """Return ``a o (s:d)``: skip ``d`` along a's (coalesced) modes, then take ``s`` of them."""
    if d == 0 or s == 1:
        return Layout(s, 0)
    modes = _flat_modes(coalesce(a))
    i, rest = 0, d
    while rest > 1 and i < len(modes) - 1:
        m, r = modes[i]
        if rest % m == 0:
            rest //= m
            i += 1
        elif m % rest == 0:
            modes[i] = (m // rest, r * rest)
            rest = 1
        else:
            raise LayoutError(f"composition: stride {d} does not divide the shape of {a} (mode {m}:{r})")
    if rest > 1:  # the last mode extends past its shape
        m, r = modes[i]
        modes[i] = (max(m // rest, 1), r * rest)
    out: list[tuple[int, int]] = []
    need = s
    for j in range(i, len(modes)):
        m, r = modes[j]
        last = j == len(modes) - 1
        if need <= m or last:
            if not last and m % need:
                raise LayoutError(f"composition: shape {s} does not divide the shape of {a} (mode {m}:{r})")
            out.append((need, r))
            need = 1
            break
        if need % m:
            raise LayoutError(f"composition: shape {s} is not a multiple of mode {m}:{r} of {a}")
        out.append((m, r))
        need //= m
    return coalesce(_from_modes(out))


def composition(a: Layout, b: Layout | int | Sequence[Any]) -> Layout:
    """Return ``a o b``: the layout whose offset at ``c`` is ``a(b(c))``; a tuple ``b`` composes mode by mode."""
    if isinstance(b, (tuple, list)):
        if len(b) > a.rank:
            raise LayoutError(f"composition: tiler of {len(b)} modes for a layout of rank {a.rank}")
        ms = a.modes()
        return make_layout(*(composition(ms[i], b[i]) if i < len(b) and b[i] is not None else ms[i]
                             for i in range(a.rank)))
    b = _as_layout(b)
    if isinstance(b.shape, tuple):
        return make_layout(*(composition(a, m) for m in b.modes()))
    return _compose_mode(a, b.shape, b.stride)


def logical_divide(a: Layout, tiler: Layout | int | Sequence[Any]) -> Layout:
    """Return ``a`` split into (tile, rest): ``a o (tiler, complement(tiler, size(a)))``; a tuple divides by mode."""
    if isinstance(tiler, (tuple, list)):
        ms = a.modes()
        return make_layout(*(logical_divide(ms[i], tiler[i]) if i < len(tiler) and tiler[i] is not None
                             else ms[i] for i in range(a.rank)))
    t = _as_layout(tiler)
    return composition(a, make_layout(t, complement(t, a.size)))


def zipped_divide(a: Layout, tiler: Sequence[Any]) -> Layout:
    """Return ((tile modes), (rest modes)): each mode divided by its tiler, the tiles gathered in mode 0."""
    d = logical_divide(a, tiler)
    tiles, rests = [], []
    for i, m in enumerate(d.modes()):
        if i < len(tiler):
            tiles.append(m.mode(0))
            rests.append(m.mode(1))
        else:
            rests.append(m)
    return make_layout(make_layout(*tiles), make_layout(*rests))


def logical_product(a: Layout, b: Layout) -> Layout:
    """Return (a, complement(a, size(a)*cosize(b)) o b): ``a`` repeated at the places ``b`` lays out."""
    return make_layout(a, composition(complement(a, a.size * b.cosize), b))


def _product2(a: Layout, b: Layout, blocked: bool) -> Layout:
    if a.rank != 2 or b.rank != 2:
        raise LayoutError(f"blocked/raked product: both layouts must have rank 2 (got {a} and {b})")
    lp = logical_product(a, b)
    ia, ib = lp.mode(0), lp.mode(1)
    pairs = [(ia.mode(i), ib.mode(i)) if blocked else (ib.mode(i), ia.mode(i)) for i in range(2)]
    return make_layout(*(make_layout(x, y) for x, y in pairs))


def blocked_product(a: Layout, b: Layout) -> Layout:
    """Return the rank-2 product whose mode i is (a_i, b_i): copies of ``a`` as contiguous blocks."""
    return _product2(a, b, True)


def raked_product(a: Layout, b: Layout) -> Layout:
    """Return the rank-2 product whose mode i is (b_i, a_i): copies of ``a`` interleaved (raked) across the tile."""
    return _product2(a, b, False)


def local_tile(a: Layout, tiler: Sequence[int], coord: Sequence[int]) -> tuple[Layout, int]:
    """Return (the tile's layout, its first offset): tile ``coord`` of ``a`` cut into ``tiler``-sized tiles."""
    z = zipped_divide(a, tiler)
    return z.mode(0), z.mode(1)(tuple(coord) if len(coord) > 1 else coord[0])


def idx2crd_by_stride(idx: int, thr: Layout) -> tuple[int, ...]:
    """Return the flat coordinate of ``thr`` that holds index ``idx`` (thread id -> thread coordinate)."""
    return tuple((idx // d) % s if d else 0 for s, d in _flat_modes(thr))


def local_partition(a: Layout, thr: Layout, idx: int) -> tuple[Layout, int]:
    """Return (thread ``idx``'s elements, their first offset): ``a`` tiled by ``thr``'s shape, one element per tile."""
    shape = tuple(size(s) for s in (thr.shape if isinstance(thr.shape, tuple) else (thr.shape,)))
    z = zipped_divide(a, shape)
    c = idx2crd_by_stride(idx, thr)
    return z.mode(1), z.mode(0)(c if len(c) > 1 else c[0])


# ----------------------------------------------------------------------------------------------------- swizzles
@dataclass(frozen=True)
class Swizzle:
    """CuTe's ``Swizzle<B, M, S>``: xor bits [M+S, M+S+B) of an offset into bits [M, M+B).

    The offset is in the units of the layout it is composed with (elements of a bf16 tile for ``Swizzle<3,3,3>``,
    bytes for ``Swizzle<3,4,3>``): the lowest M bits (one 2**M-element chunk) stay, the B bits above them take
    the xor of the B bits S places higher (the row, when a row is 2**(M+S) units).
    """

    b: int
    m: int
    s: int

    def __post_init__(self) -> None:
        if self.b < 0 or self.m < 0 or self.s < self.b:
            raise LayoutError(f"Swizzle<{self.b},{self.m},{self.s}>: needs B >= 0, M >= 0 and S >= B (CuTe "
                              "requires the xor-ed bit ranges not to overlap)")

    def __call__(self, offset: int) -> int:
        """Return the swizzled offset."""
        mask = ((1 << self.b) - 1) << (self.m + self.s)
        return offset ^ ((offset & mask) >> self.s)

    def __str__(self) -> str:
        return f"S<{self.b},{self.m},{self.s}>"


@dataclass(frozen=True)
class SwizzledLayout:
    """``swizzle o layout``: the layout's offset, then the swizzle (CuTe's ComposedLayout with offset 0)."""

    swizzle: Swizzle
    layout: Layout

    def __call__(self, *coord: IntTuple) -> int:
        """Return the swizzled offset of a coordinate or 1-D index."""
        return self.swizzle(self.layout(*coord))

    def __str__(self) -> str:
        return f"{self.swizzle} o 0 o {self.layout}"

    @property
    def shape(self) -> IntTuple:
        """Return the layout's shape."""
        return self.layout.shape

    @property
    def size(self) -> int:
        """Return the number of coordinates."""
        return self.layout.size

    @property
    def rank(self) -> int:
        """Return the number of top-level modes."""
        return self.layout.rank

    def mode(self, i: int) -> Layout:
        """Return top-level mode ``i`` of the (unswizzled) layout."""
        return self.layout.mode(i)

    def offsets(self) -> list[int]:
        """Return the swizzled offsets of indices 0 .. size-1 (pure Python)."""
        return [self(i) for i in range(self.size)]


def offsets_of(layouts: Iterable[Layout | SwizzledLayout]) -> list[list[int]]:
    """Return each layout's offsets (pure Python)."""
    return [x.offsets() for x in layouts]
