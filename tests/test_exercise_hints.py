"""Exercise hints help without handing over the code: no hint contains a line that the solution adds to the starter.

The issue this guards against: a last hint that *is* the solution's line (``blocks = (n + THREADS - 1) // THREADS``,
a ``tl.store(...)`` call, a ``"(float)x * (float)x"`` snippet). A hint may name functions and describe the step.
"""

from __future__ import annotations

import re

import pytest

import workbench as wb
from workbench.practice import starters
from workbench.practice.exercises import exercises

MIN_CHARS = 8  # shorter lines ("a + b", "0") are words a hint may need, not code it gives away


def _code(line: str) -> str:
    """Return ``line`` without its comment, whitespace and a trailing comma or semicolon."""
    line = re.split(r"\s#\s|\s//\s", line, maxsplit=1)[0]
    return re.sub(r"\s+", "", line).rstrip(",;")


def solution_only_lines(ex) -> list[str]:
    """Return the code lines of ``ex``'s solution that its starter does not have (comments and blanks ignored)."""
    starter = {_code(s) for s in ex.starter.splitlines()}
    found = [_code(s) for s in starters.solution_text(ex.solution_file).splitlines()]
    return [c for c in found if len(c) >= MIN_CHARS and c not in starter]


def given_away(hint: str, lines: list[str]) -> list[str]:
    """Return the solution lines that ``hint`` contains, whitespace ignored."""
    h = re.sub(r"\s+", "", hint)
    return [c for c in lines if c in h]


@pytest.mark.parametrize("ex_id", exercises())
def test_no_hint_is_a_line_of_the_solution(ex_id):
    ex = wb.exercise(ex_id)
    lines = solution_only_lines(ex)
    assert lines, f"{ex_id}: the solution adds no line to the starter"
    bad = {i + 1: given_away(h, lines) for i, h in enumerate(ex.hints) if given_away(h, lines)}
    assert not bad, f"{ex_id}: hints give away solution lines {bad}"


@pytest.mark.parametrize("ex_id", exercises())
def test_hints_are_words_not_code(ex_id):
    """The last hint still says what to do: a sentence of some length, not an empty nudge."""
    last = wb.exercise(ex_id).hints[-1]
    assert len(last.split()) >= 12 and last.rstrip().endswith((".", ")")), last


def test_the_check_catches_a_hint_that_is_code():
    ex = wb.exercise("vecadd-numba-grid")
    lines = solution_only_lines(ex)
    assert given_away("blocks = (n + THREADS - 1) // THREADS; the kernel's `if i < n` keeps the rest idle.", lines)
    assert not given_away("Round the division up instead of down.", lines)
