"""Tabulate a kernel ladder's rungs: each tile's arithmetic intensity, the bound it sets, and what to expect.

A thread block that computes a ``BM x BN`` output tile of a GEMM streams ``(BM + BN) * K`` input elements for
``2 * BM * BN * K`` FLOPs, so against DRAM (if no load hit in L2) its intensity is :func:`tile_intensity`,
``2 BM BN / ((BM + BN) * bytes per element)``. :func:`ladder_table` turns a list of :class:`Rung` (or an op's
``kernels/<op>/ladder.toml``) into one row per rung on a device of :mod:`workbench.hardware`: the intensity, the
DRAM-only bound ``min(peak, I * bandwidth)`` and whether compute or memory sets it, and the rung's note, with the
step measured in a cited source (:class:`Cited`) computed from the cited figures. The table shows as HTML in a
notebook and as aligned text in a terminal (``print(table)``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import hardware

__all__ = ["Cited", "LadderRow", "LadderTable", "Rung", "ladder_table", "load_ladder", "tile_intensity"]

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
COLUMNS = ("rung", "CUDA C variant", "tile", "I_tile (FLOP/B)", "DRAM-only bound (TFLOP/s)",
           "limit, and what to expect")


def elem_bytes(dtype: Any) -> int:
    """Return the bytes of one element of a floating ``dtype`` (the bits in its canonical name / 8)."""
    name = hardware.canonical_dtype(dtype)
    m = re.search(r"\d+", name)
    if m is None:
        raise ValueError(f"elem_bytes: no element size in dtype {name!r}")
    return int(m.group()) // 8


def tile_intensity(bm: int, bn: int, elem_bytes: float) -> float:
    """Return the FLOP/B of a BM x BN GEMM tile against DRAM: 2 BM BN / ((BM + BN) * bytes per element)."""
    for name, v in (("bm", bm), ("bn", bn), ("elem_bytes", elem_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ValueError(f"tile_intensity: {name} must be a positive number, got {v!r}")
    return 2 * bm * bn / ((bm + bn) * elem_bytes)


@dataclass(frozen=True)
class Cited:
    """Figures measured elsewhere, with their source: ``values`` by key, ``what`` they are, ``short`` to name them."""

    source: str
    what: str
    values: Mapping[str, float]
    short: str = "cited"


@dataclass(frozen=True)
class Rung:
    """One rung: its name, variant, output tile, input dtype and note on what limits it.

    ``cited``: the rung's key in :attr:`Cited.values`, for the measured step over the rung above (when that one is
    cited too); ``versus``: another key, to give the rung's share of it instead. ``measured``: add the device's
    measured ceiling for the dtype (:func:`workbench.hardware.measured_tflops`).
    """

    name: str
    variant: str
    bm: int
    bn: int
    dtype: str
    limit: str
    cited: str | None = None
    versus: str | None = None
    measured: bool = False


@dataclass(frozen=True)
class LadderRow:
    """One row of a :class:`LadderTable`: the rung, its tile intensity and DRAM-only bound, and its note."""

    rung: Rung
    intensity: float  # FLOP/B against DRAM
    bound_tflops: float  # min(peak, intensity * bandwidth)
    bound_by: str  # "compute" or "memory"
    note: str

    def cells(self) -> tuple[str, ...]:
        """Return the row's cells as text, in the order of :data:`COLUMNS`."""
        r = self.rung
        return (r.name, r.variant, f"{r.bm}x{r.bn} {r.dtype}", f"{self.intensity:.3g}",
                f"{self.bound_tflops:.3g} ({self.bound_by})", self.note)


@dataclass(frozen=True)
class LadderTable:
    """A ladder tabulated on one device: ``rows`` (one per rung), shown as HTML or as text."""

    device: hardware.DeviceSpec
    rows: tuple[LadderRow, ...]
    cited: Cited | None = None
    columns: tuple[str, ...] = field(default=COLUMNS)

    def row(self, name_or_variant: str) -> LadderRow:
        """Return the row of the rung with this name or variant; KeyError listing the rungs otherwise."""
        for r in self.rows:
            if name_or_variant in (r.rung.name, r.rung.variant):
                return r
        raise KeyError(f"LadderTable.row: no rung {name_or_variant!r}; rungs: {[r.rung.name for r in self.rows]}")

    def caption(self) -> str:
        """Return what the bound assumes, and the source of the cited figures."""
        bw = self.device.bandwidth_gbs
        text = (f"{self.device.name}: DRAM-only bound = min(datasheet peak of the dtype, I_tile x {bw:.0f} GB/s "
                "datasheet bandwidth), every tile load from DRAM.")
        if self.cited is not None:
            figures = ", ".join(f"{k} {v:g}" for k, v in self.cited.values.items())
            text += f" {self.cited.short}: {self.cited.what}, from {self.cited.source}: {figures}."
        return text

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r.cells()) + "</tr>" for r in self.rows)
        return (f"<table><caption style='caption-side:bottom;text-align:left'>{esc(self.caption())}</caption>"
                f"<tr>{head}</tr>{body}</table>")

    def __str__(self) -> str:
        grid = [self.columns, *(r.cells() for r in self.rows)]
        widths = [max(len(row[i]) for row in grid) for i in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in grid]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join([*lines, self.caption()])

    def __repr__(self) -> str:
        return str(self)


def _note(rung: Rung, above: Rung | None, cited: Cited | None, device: hardware.DeviceSpec) -> str:
    """Return the rung's limit with the cited step (or share) and the measured ceiling it asks for."""
    parts = [rung.limit]
    if rung.cited is not None and cited is not None:
        mine = cited.values[rung.cited]
        if rung.versus is not None:
            share = 100 * mine / cited.values[rung.versus]
            parts.append(f"{cited.short}'s reached {share:.1f}% of {rung.versus}")
        elif above is not None and above.cited is not None:
            parts.append(f"{cited.short}: {mine / cited.values[above.cited]:.2f}x over the rung above")
    if rung.measured:
        ceiling = hardware.measured_tflops(device, rung.dtype)
        if ceiling is not None:
            parts.append(f"measured ceiling on {device.name} (torch matmul): {ceiling:.0f} TFLOP/s")
    return "; ".join(parts)


def _check_rungs(rungs: Sequence[Rung], cited: Cited | None) -> None:
    if not rungs:
        raise ValueError("ladder_table: expected at least one rung")
    for r in rungs:
        if not isinstance(r, Rung):
            raise TypeError(f"ladder_table: expected Rung objects, got {type(r).__name__} {r!r}")
        for key in (r.cited, r.versus):
            if key is not None and (cited is None or key not in cited.values):
                known = sorted(cited.values) if cited is not None else "none: no cited= given"
                raise KeyError(f"ladder_table: rung {r.name!r} cites {key!r}, which is not a cited figure ({known})")


def ladder_table(rungs: Sequence[Rung] | str, device: hardware.DeviceSpec | str = "H200",
                 cited: Cited | None = None) -> LadderTable:
    """Return the table of ``rungs`` on ``device``: one row per rung (an op name loads ``kernels/<op>/ladder.toml``).

    Per rung: the tile intensity, the DRAM-only bound ``min(peak, I * bandwidth)`` from the device's datasheet peak
    for the rung's dtype and its datasheet bandwidth, and the note, to which the step measured in ``cited`` over
    the rung above (or the share of ``versus``) is added, computed from the cited figures.
    """
    if isinstance(rungs, str):
        rungs, from_file = load_ladder(rungs)
        cited = cited if cited is not None else from_file
    _check_rungs(rungs, cited)
    spec = hardware.get_device(device)
    bw_tbs = spec.bandwidth_gbs / 1e3
    rows, above = [], None
    for r in rungs:
        i = tile_intensity(r.bm, r.bn, elem_bytes(r.dtype))
        peak = hardware.peak_tflops(spec, r.dtype)
        by = "compute" if i * bw_tbs >= peak else "memory"
        rows.append(LadderRow(r, i, min(peak, i * bw_tbs), by, _note(r, above, cited, spec)))
        above = r
    return LadderTable(spec, tuple(rows), cited)


def load_ladder(op: str, path: str | Path | None = None) -> tuple[list[Rung], Cited | None]:
    """Return the rungs and cited figures of ``kernels/<op>/ladder.toml`` (or of ``path``)."""
    path = Path(path) if path is not None else KERNELS / op / "ladder.toml"
    if not path.is_file():
        raise FileNotFoundError(f"load_ladder({op!r}): no ladder file {path}")
    from workbench.practice.loading import tomllib  # the standard library's on 3.11+, else tomli

    if tomllib is None:
        raise RuntimeError("load_ladder: reading a ladder file needs Python >= 3.11 (tomllib) or the tomli package")
    data = tomllib.loads(path.read_text())
    c = data.get("cited")
    cited = None if c is None else Cited(c["source"], c["what"], dict(c["values"]), c.get("short", "cited"))
    rungs = []
    for n, r in enumerate(data.get("rung", []), 1):
        try:
            bm, bn = r["tile"]
            rungs.append(Rung(r["name"], r["variant"], int(bm), int(bn), str(r["dtype"]), r["limit"],
                              r.get("cited"), r.get("versus"), bool(r.get("measured", False))))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"load_ladder: {path} rung {n}: {type(e).__name__}: {e} (expected name, variant, "
                             "tile = [BM, BN], dtype and limit)") from None
    return rungs, cited
