"""Interview practice: drills from a blank page, spot-the-bug, napkin and concept questions, mock interviews.

``wb.drills(topic=None, kind=None, level=None)`` lists the drills; ``d = wb.drill(id)`` opens one: ``d.show()``,
``d.submit(answer)`` (a :class:`Result` with ``.passed`` and ``.feedback``), ``d.hint()``, ``d.reveal()``,
``d.start(minutes)`` for a timed attempt. ``wb.mock_interview(...)`` deals a timed interview from the weakest
topics, with a follow-up that changes the implement item's problem, and ends in feedback per topic;
``wb.progress()`` shows mastery per topic over the drills and the exercises, and what to do next. The drills are
data: ``kernels/<op>/drills.toml``, one file per op (:mod:`workbench.practice.loading`); numeric answers come from
:mod:`workbench.practice.answers`.

Four kinds (:mod:`~workbench.practice.implement`, :mod:`~workbench.practice.spot`,
:mod:`~workbench.practice.napkin`, :mod:`~workbench.practice.concept`); every attempt, reveal (``reveal()``, a
learner's ``model_answer()``), give-up and self-assessment goes to the progress store
(:mod:`workbench.practice.store`, SQLite under ``$WORKBENCH_HOME``), and so does every exercise's ``check``; a
pass after a reveal or over time is marked, not clean (:mod:`workbench.practice.summary`).
"""

from __future__ import annotations

import difflib
from typing import Any

from workbench.practice.base import KINDS, LEVELS, TOPIC_NOTES, TOPICS, Drill, DrillDataError, Result
from workbench.practice.mock import MockInterview, ScoreSheet, mock_interview
from workbench.practice.spot import BugAnswer

__all__ = ["KINDS", "LEVELS", "TOPICS", "TOPIC_NOTES", "BugAnswer", "Drill", "DrillDataError", "DrillList",
           "MockInterview", "Result", "ScoreSheet", "catalogue", "drill", "drills", "mock_interview", "progress",
           "reload"]

_CATALOGUE: dict[str, Drill] = {}


def catalogue() -> dict[str, Drill]:
    """Return every drill by id (read from the drills.toml files once per process; ``reload()`` re-reads)."""
    if not _CATALOGUE:
        from workbench.practice.loading import load_all

        _CATALOGUE.update(load_all())
    return _CATALOGUE


def reload() -> dict[str, Drill]:
    """Re-read every drills.toml (after editing one) and return the catalogue."""
    _CATALOGUE.clear()
    return catalogue()


class DrillList(list):
    """A list of drills that renders as a table in a notebook; ``browse()`` opens the widget browser."""

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><td><code>{html.escape(d.id)}</code></td><td>{d.kind.replace('_', '-')}</td>"
                       f"<td>{d.level}</td><td>{d.topic}</td><td>{html.escape(d.title)}</td></tr>" for d in self)
        return (f"<div><b>{len(self)} drill(s)</b><table><tr><th>id</th><th>kind</th><th>level</th><th>topic</th>"
                f"<th>title</th></tr>{rows}</table></div>")

    def __repr__(self) -> str:
        lines = [f"{len(self)} drill(s)"] + [f"  {d.id:<40} {d.kind:<13} {d.level:<7} {d.topic:<13} {d.title}"
                                            for d in self]
        return "\n".join(lines)

    def browse(self) -> Any:
        """Return the widget browser over every drill (dropdowns for topic, kind and level; the chosen one shown)."""
        from workbench.practice.browser import browser

        return browser()


def _check_choice(name: str, value: str | None, allowed: tuple[str, ...] | list[str]) -> None:
    if value is not None and value not in allowed:
        raise ValueError(f"drills: unknown {name} {value!r}; {name}s are {list(allowed)}")


def drills(topic: str | None = None, kind: str | None = None, level: str | None = None,
           chapter: str | None = None) -> DrillList:
    """Return fresh handles on the drills matching every filter (chapter: the notebook, e.g. '01-gemm')."""
    cat = catalogue()
    _check_choice("topic", topic, TOPICS)
    _check_choice("kind", kind, KINDS)
    _check_choice("level", level, LEVELS)
    _check_choice("chapter", chapter, sorted({d.chapter for d in cat.values()}))
    return DrillList(d.fresh() for d in cat.values() if (topic is None or d.topic == topic)
                     and (kind is None or d.kind == kind) and (level is None or d.level == level)
                     and (chapter is None or d.chapter == chapter))


def drill(id: str) -> Drill:  # noqa: A002
    """Return a fresh handle on drill ``id`` (its statement displays in a notebook)."""
    cat = catalogue()
    if not isinstance(id, str):
        raise TypeError(f"drill(id): id is a str such as {next(iter(cat))!r}, got {type(id).__name__}")
    if id not in cat:
        close = difflib.get_close_matches(id, list(cat), n=3)
        raise KeyError(f"unknown drill {id!r}" + (f"; did you mean {close}?" if close else "")
                       + " wb.drills() lists them all")
    return cat[id].fresh()


def progress() -> Any:
    """Return the learner's progress (a plotly chart and the weakest topics in a notebook, a table in a terminal)."""
    from workbench.practice.summary import progress as _progress

    return _progress(catalogue())
