"""Shared-memory requests on CuTe layouts, counted and drawn with ``wb.profile``'s 32-bank, 4-byte model.

A request is a list of lanes, each reading (or writing) a contiguous vector at the offset a layout gives its
coordinate. The offsets come from CuTe (``wb.cute.evaluate``, swizzle included); the counting is
:class:`workbench.access_picture.Request`'s, the one ``wb.profile``'s pictures use: lanes go in phases (32 lanes for
accesses of up to 4 bytes, 16 for 8, 8 for 16), and a phase takes as many wavefronts as the most distinct 4-byte
words one of the 32 banks holds. Wavefronts beyond one per phase are bank conflicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.access_picture import LaneAccess, Request, bank_map_figure
from workbench.cute.algebra import Layout, LayoutError, SwizzledLayout

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["BankCount", "bank_count", "bank_picture", "cp_async", "ldmatrix", "request", "wgmma_read"]


def _offsets(layout: Layout | SwizzledLayout) -> tuple[list[int], int]:
    from workbench.cute import _grid, evaluate

    if not isinstance(layout, (Layout, SwizzledLayout)) or layout.rank != 2:
        raise LayoutError(f"wb.cute: a shared-memory tile must be a rank-2 wb.cute.Layout (rows, columns), got "
                          f"{layout}")
    return evaluate(layout), _grid(layout)[0]


def request(layout: Layout | SwizzledLayout, coords: Sequence[tuple[int, int]], *, itemsize: int = 2,
            vector: int = 16, kind: str = "load", what: str = "") -> Request:
    """Return the shared request in which lane i accesses ``vector`` bytes from element ``coords[i]`` of the tile.

    The vector's elements must sit at consecutive offsets (else no single ``vector``-byte access can move them):
    a swizzle that splits a 16-byte chunk is reported, naming the coordinate.
    """
    if vector % itemsize or vector not in (1, 2, 4, 8, 16):
        raise LayoutError(f"wb.cute.request: vector={vector} bytes must be 1, 2, 4, 8 or 16 and a multiple of "
                          f"itemsize={itemsize}")
    flat, rows = _offsets(layout)
    cols = len(flat) // rows
    n = vector // itemsize
    accesses = []
    for lane, (r, c) in enumerate(coords):
        if not (0 <= r < rows and 0 <= c and c + n <= cols):
            raise LayoutError(f"wb.cute.request: lane {lane} reads elements ({r}, {c}..{c + n - 1}), outside the "
                              f"{rows}x{cols} tile")
        offs = [flat[r + rows * (c + k)] for k in range(n)]
        if offs != list(range(offs[0], offs[0] + n)):
            raise LayoutError(f"wb.cute.request: lane {lane}'s {vector}-byte vector at ({r}, {c}) is not contiguous "
                              f"in {layout} (offsets {offs}): the layout or its swizzle splits the chunk")
        addr = offs[0] * itemsize
        if addr % vector:
            raise LayoutError(f"wb.cute.request: lane {lane}'s {vector}-byte access at byte {addr} is misaligned")
        accesses.append(LaneAccess(warp=0, lane=lane, thread=(lane, 0, 0), buffer="smem", addr=addr, offset=addr,
                                   size=vector))
    return Request(warp=0, seq=0, space="shared", kind=kind, line=None, code=what, accesses=accesses)


def ldmatrix(layout: Layout | SwizzledLayout, row: int = 0, col: int = 0, *, matrices: int = 4,
             itemsize: int = 2) -> Request:
    """Return ``ldmatrix.x{matrices}`` on the tile: lanes 8k..8k+7 give the 8 row addresses of 8x8 matrix k.

    Matrices go down, then across (the A-fragment order of ``mma.m16n8k16``): matrix k starts at row
    ``row + 8*(k % 2)`` and column ``col + 8*(k // 2)`` for x4 (``row + 8*k`` for x2). Each row is 16 bytes.
    """
    if matrices not in (1, 2, 4):
        raise LayoutError(f"wb.cute.ldmatrix: matrices must be 1, 2 or 4 (ldmatrix .x1/.x2/.x4), got {matrices}")
    per_row = 16 // itemsize
    coords = []
    for lane in range(8 * matrices):
        k, r = divmod(lane, 8)
        dr, dc = (8 * (k % 2), per_row * (k // 2)) if matrices == 4 else (8 * k, 0)
        coords.append((row + dr + r, col + dc))
    return request(layout, coords, itemsize=itemsize, vector=16, what=f"ldmatrix.x{matrices}")


def cp_async(layout: Layout | SwizzledLayout, row: int = 0, *, lanes: int = 32, itemsize: int = 2) -> Request:
    """Return a warp's ``cp.async`` 16-byte stores into the tile: consecutive lanes fill a row's chunks, row after row.

    Lane i writes chunk ``i % chunks_per_row`` of row ``row + i // chunks_per_row`` (the usual global-to-shared
    copy: each thread moves 16 bytes, a warp moves ``lanes * 16`` bytes).
    """
    flat, rows = _offsets(layout)
    per_row = 16 // itemsize
    chunks = (len(flat) // rows) // per_row
    if chunks < 1:
        raise LayoutError(f"wb.cute.cp_async: the tile's rows are narrower than one 16-byte chunk ({layout})")
    coords = [(row + i // chunks, per_row * (i % chunks)) for i in range(lanes)]
    return request(layout, coords, itemsize=itemsize, vector=16, kind="store", what="cp.async 16 B")


def wgmma_read(layout: Layout | SwizzledLayout, rows: int = 64, k_chunks: int = 2, *, itemsize: int = 2) -> Request:
    """Return a model of wgmma reading a K-major operand tile: each 8-row x 16-byte core matrix is one phase.

    wgmma reads shared memory through a descriptor, not lane addresses; the model stands in 8 lanes per core
    matrix, each reading one 16-byte row, core matrices down the rows first, then along K (``rows`` x
    ``k_chunks`` 16-byte chunks). A model, labelled as such: it counts the banks the core matrices' rows share.
    """
    per_row = 16 // itemsize
    coords = []
    for kc in range(k_chunks):
        for r in range(rows):
            coords.append((r, kc * per_row))
    return request(layout, coords, itemsize=itemsize, vector=16, what="wgmma core matrices (model)")


@dataclass(frozen=True)
class BankCount:
    """The 32-bank model's count of one shared request (the numbers wb.profile reports for it)."""

    wavefronts: int
    phases: int
    conflicts: int
    ways: int  # the most distinct words one bank serves in a phase (1: conflict-free)

    def __str__(self) -> str:
        verdict = "conflict-free" if not self.conflicts else f"{self.ways}-way conflict"
        return (f"{self.wavefronts} wavefronts over {self.phases} phases: {self.conflicts} bank conflicts "
                f"({verdict})")


def bank_count(req: Request) -> BankCount:
    """Return the request's wavefronts, phases, conflicts and worst ways, by wb.profile's 32-bank model."""
    phases = req.bank_phases()
    ways = max((len(ws) for banks in phases.values() for ws in banks.values()), default=0)
    return BankCount(req.wavefronts, len(phases), req.bank_conflicts, ways)


def bank_picture(req: Request, title: str = "") -> go.Figure:
    """Return wb.profile's bank map of the request: a column per bank, a row per wavefront, cells by lane."""
    c = bank_count(req)
    head = f"{title or req.code or 'shared request'}: {c}"
    width = max(a.size for a in req.accesses)
    sub = f"{len(req.accesses)} lanes, {width}-byte accesses, {req.lanes_per_phase} lanes per phase"
    return bank_map_figure([req], head, sub, notes=["Offsets from CuTe's layout (swizzle included), counted by "
                                                     "wb.profile's 32-bank model; a model, not a measurement."])
