"""Napkin drills: a number, accepted within a stated relative tolerance; the model answer is computed by code.

The question is a template filled from the drill's ``args`` and the facts its answer function quotes from the
hardware tables (``given``), so no number in a question or an answer is typed by hand.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.answers import FUNCTIONS, Napkin, fmt
from workbench.practice.base import Drill, Grade


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
        if rel <= self.tolerance or x == n.value:
            return Grade(True, f"Right: {fmt(n.value)} {n.unit} (yours is {100 * rel:.1f}% off).\n\n"
                               f"{n.derivation()}\n\n{self.why}", summary)
        ratio = x / n.value if n.value else math.inf
        how = (f"about {ratio:.3g}x the model answer" if ratio > 0 else
               "of the wrong sign" if ratio < 0 else "zero")
        within = "exact" if self.tolerance == 0 else f"within {100 * self.tolerance:g}%"
        return Grade(False, f"Not {within}: yours is {how}. Check what you counted (bytes "
                            "in and out, the element size, the units). `d.hint()` helps; `d.reveal()` shows the "
                            "derivation (recorded as a reveal).", summary)

    def model_answer(self) -> float:
        return self.compute().value

    def explanation(self) -> str:
        return f"{self.compute().derivation()}\n\n{self.why}"
