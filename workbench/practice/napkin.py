"""Napkin drills: a number, accepted within a stated relative tolerance; the model answer is computed by code.

The question is a template filled from the drill's ``args`` and the facts its answer function quotes from the
hardware tables (``given``), so no number in a question or an answer is typed by hand.

A wrong answer whose ratio to the model answer is a known slip is told which one (:func:`likely_slip`): (1024/1000)^k
for GiB against GB (k = 1..3), 8 for bits against bytes, 2 (or 1/2) for an element size, a read counted without its
write, or a multiply-add counted as one FLOP, 3/2 for a tensor too many or too few of three, 1,000^j for a unit
prefix and 100 for a fraction given as a percentage; a unit slip combined with one of the others too (MiB against
GB), in either direction. Only the slips that fit the answer's unit are tried (no GiB slip for a count of waves).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from workbench.practice.answers import FUNCTIONS, Napkin, fmt
from workbench.practice.base import Drill, Grade


@dataclass(frozen=True)
class Slip:
    """One known way to be off by a constant factor: yours / the model = ``factor``."""

    factor: float
    label: str  # how the factor reads: "8", "(1024/1000)^3", "1,000"
    why: str  # the reason, for this direction
    window: float  # relative distance from ``factor`` that still counts as this slip


def _slip_families() -> dict[str, list[Slip]]:
    """Return the slip families: a learner's answer is off by at most one member of each."""
    big = ("kilo", "mega", "giga")
    prefix = []
    for j in (1, 2, 3):
        what = (f"a unit prefix {j} step{'s' if j > 1 else ''} off ({big[j - 1]}: 10^{3 * j}; e.g. us against "
                "ms, MB against GB, GFLOP against TFLOP)")
        prefix += [Slip(1000.0 ** j, f"{1000 ** j:,}", what, 0.04), Slip(1000.0 ** -j, f"1/{1000 ** j:,}", what, 0.04)]
    binary = []
    for k in (1, 2, 3):
        unit = ("KiB", "MiB", "GiB")[k - 1]
        dec = ("kB", "MB", "GB")[k - 1]
        what = (f"binary against decimal units: 1 {unit} = 2^{10 * k} B = {1.024 ** k:.4g} {dec} (10^{3 * k} B); "
                "bandwidths in GB/s and FLOP rates are decimal, memory sizes in KiB/MiB/GiB binary")
        binary += [Slip(1.024 ** k, f"(1024/1000)^{k}" if k > 1 else "1024/1000", what, 0.01),
                   Slip(1.024 ** -k, f"(1000/1024)^{k}" if k > 1 else "1000/1024", what, 0.01)]
    eight = [Slip(8.0, "8", "bits counted where the question counts bytes (1 B = 8 bit), or an 8-byte element for "
                            "a 1-byte one", 0.04),
             Slip(1 / 8, "1/8", "bytes counted where the question counts bits, a division by 8 too many, or a 1-byte "
                                "element for an 8-byte one", 0.04)]
    two = [Slip(2.0, "2", "a factor of 2 too many: an element size doubled (float32's 4 bytes where float16/bfloat16 "
                          "has 2), traffic counted twice where it moves once, or a count doubled", 0.04),
           Slip(0.5, "1/2", "a factor of 2 missing: an element size halved (float16's 2 bytes where float32 has 4), "
                            "a read counted without its write (or the other way round), or a multiply-add counted as "
                            "1 FLOP where it is 2", 0.04)]
    three = [Slip(1.5, "3/2", "one tensor too many counted: three where two move (or a read and a write where only "
                              "one happens)", 0.03),
             Slip(2 / 3, "2/3", "one tensor of three left out: two inputs read and one output written, for instance, "
                                "counted as two", 0.03)]
    percent = [Slip(100.0, "100", "a percentage where the question asks for a fraction, or a percentage multiplied "
                                  "by 100 once more", 0.04),
               Slip(0.01, "1/100", "a fraction (0..1) where the question asks for a percentage: multiply by 100",
                    0.04)]
    return {"prefix": prefix, "binary": binary, "percent": percent, "eight": eight, "two": two, "three": three}


_FAMILIES = _slip_families()
# The pairs of slips that happen together (MiB against GB: a prefix and binary; Mbit against MB: a prefix and 8).
PAIRS = {("prefix", "binary"), ("prefix", "eight"), ("prefix", "two"), ("prefix", "three"), ("binary", "eight"),
         ("percent", "two")}
TIME_UNITS = {"s", "ms", "us", "ns"}


def families_for(unit: str | None) -> list[str]:
    """Return the slip families that make sense for an answer in ``unit`` (None: all of them).

    Bytes, FLOPs and times (from bandwidths) can slip by a prefix, binary against decimal, bits against bytes; a
    percentage by 100; a count or a plain ratio (waves, rows, x) only by a factor of 2 or 3/2.
    """
    if unit is None:
        return list(_FAMILIES)
    if "B" in unit or "FLOP" in unit or unit in TIME_UNITS:
        return ["prefix", "binary", "eight", "two", "three"]
    if unit == "%":
        return ["percent", "two", "three"]
    return ["two", "three"]


def likely_slip(ratio: float, unit: str | None = None) -> list[Slip] | None:
    """Return the known slips (one or two) that explain ``ratio`` = yours / the model, or None.

    Only the families that fit ``unit`` are tried (:func:`families_for`). The simplest explanation wins: one slip
    before two (only the :data:`PAIRS` that happen together); among equals, the closest. A (1024/1000)^k slip
    matches within 1% (they are 2.4% apart), 3/2 within 3%, the others within 4%.
    """
    if not math.isfinite(ratio) or ratio <= 0:
        return None
    names = families_for(unit)
    best: tuple[int, float, list[Slip]] | None = None
    for n in (1, 2):
        for fams in product(names, repeat=n):
            if n == 2 and fams not in PAIRS:
                continue
            for combo in product(*(_FAMILIES[f] for f in fams)):
                f = math.prod(sl.factor for sl in combo)
                off = abs(ratio / f - 1)
                if off <= min(sl.window for sl in combo) and (best is None or (n, off) < best[:2]):
                    best = (n, off, list(combo))
        if best is not None:
            return best[2]
    return None


def slip_text(ratio: float, unit: str) -> str:
    """Return the feedback naming the likely slip behind ``ratio`` ('' when none is known)."""
    slips = likely_slip(ratio, unit)
    if not slips:
        return ""
    label = " x ".join(sl.label for sl in slips)
    reasons = "; and ".join(sl.why for sl in slips)
    return (f"Yours is {ratio:.4g}x the model answer, which matches {label}, the ratio of a common slip: {reasons}."
            + (f" The answer is in {unit}." if unit else ""))


@dataclass(eq=False, repr=False)
class NapkinDrill(Drill):
    """Estimate a number on the back of a napkin: ``d.submit(1.2e3)``; within ``tolerance`` (relative) passes."""

    question: str = ""
    answer_fn: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    tolerance: float = 0.05
    why: str = ""  # markdown shown with the derivation

    def compute(self) -> Napkin:
        """Return the model answer, computed now from the hardware tables and the op's formulas."""
        return FUNCTIONS[self.answer_fn](**self.args)

    def _fields(self) -> dict[str, Any]:
        n = self.compute()
        return {**{k: (fmt(v) if isinstance(v, float) else v) for k, v in self.args.items()}, **n.given,
                "unit": n.unit, "tolerance_pct": f"{100 * self.tolerance:g}"}

    def statement(self) -> str:
        within = "exactly" if self.tolerance == 0 else f"within {100 * self.tolerance:g}%"
        unit = self.compute().unit
        return self.question.format(**self._fields()) + (f"\n\nAnswer in **{unit}**, {within}." if unit else
                                                         f"\n\nAnswer with a number, {within}.")

    def answer_format(self) -> str:
        unit = self.compute().unit
        return f"a number{f' in {unit}' if unit else ''}: `d.submit(123.4)`."

    def _grade(self, answer: Any) -> Grade:
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            raise TypeError(f"drill {self.id}: answer with a number (in {self.compute().unit}), got {answer!r}")
        x = float(answer)
        n = self.compute()
        if not math.isfinite(x):
            return Grade(False, f"{x} is not a finite number.", f"{x}")
        rel = abs(x - n.value) / abs(n.value) if n.value else abs(x)
        summary = f"{x:g} {n.unit} (model {n.value:.6g})"
        ratio = x / n.value if n.value else math.inf
        if rel <= self.tolerance or x == n.value:
            note = _near_note(ratio, n.unit)
            return Grade(True, f"Right: {fmt(n.value)} {n.unit} (yours is {100 * rel:.1f}% off).{note}"
                               f"\n\n{n.derivation()}\n\n{self.why}", summary)
        within = "exact" if self.tolerance == 0 else f"within {100 * self.tolerance:g}%"
        slip = slip_text(ratio, n.unit)
        if slip:
            return Grade(False, f"Not {within}. {slip} `d.hint()` helps; `d.reveal()` shows the derivation "
                                "(recorded as a reveal).", summary + f", slip {ratio:.4g}x")
        how = (f"about {ratio:.3g}x the model answer" if ratio > 0 else
               "of the wrong sign" if ratio < 0 else "zero")
        return Grade(False, f"Not {within}: yours is {how}, not a ratio a known slip explains (units, bits and "
                            "bytes, a factor of 2). Check what you counted (bytes in and out, the element size, "
                            "the FLOPs per multiply-add). `d.hint()` helps; `d.reveal()` shows the derivation "
                            "(recorded as a reveal).", summary)

    def model_answer(self) -> float:
        return self.compute().value

    def explanation(self) -> str:
        return f"{self.compute().derivation()}\n\n{self.why}"


def _near_note(ratio: float, unit: str) -> str:
    """Return a note for a pass in a byte unit that is exactly (1024/1000)^k off (GB for GiB), '' otherwise."""
    if "binary" not in families_for(unit):
        return ""
    for k in (1, 2, 3, -1, -2, -3):
        if abs(ratio / 1.024 ** k - 1) < 0.002:
            return (f" It passes the tolerance, but yours is {ratio:.4g}x, which is (1024/1000)^{abs(k)}: "
                    "mind binary (KiB, MiB, GiB) against decimal (kB, MB, GB) units.")
    return ""
