"""Mock interviews: one implement drill, one spot-the-bug drill and two questions, against one clock.

``wb.mock_interview(minutes=45, topics=..., seed=...)`` deals the four drills (a napkin and a concept question
when the topics have both), shows a countdown, and locks every hint while the interview runs. Work through the
items in order: ``mock.submit(answer)`` grades the current one and moves on when it passes; ``mock.give_up()``
fails it and moves on (its hints unlock). ``mock.finish()`` (or the last item) gives the score sheet: time per
item, hints used, pass or fail. Every attempt goes to the progress store, tagged with the interview's id.
"""

from __future__ import annotations

import html
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.practice.base import TOPICS, Drill, Result
from workbench.practice.render import display_markdown, in_notebook, mmss

ORDER = ("concept", "napkin", "spot_the_bug", "implement")  # warm-up questions first, the coding last


@dataclass
class ItemScore:
    """One row of the score sheet."""

    drill: str
    kind: str
    topic: str
    level: str
    seconds: float | None
    hints: int
    outcome: str  # "pass", "pass (over time)", "fail", "gave up", "not reached"

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


@dataclass
class ScoreSheet:
    """The end of a mock interview: one :class:`ItemScore` per item, and the totals."""

    id: str
    minutes: float
    seconds: float
    items: list[ItemScore]

    @property
    def passed(self) -> int:
        return sum(i.passed for i in self.items)

    def text(self) -> str:
        rows = [f"mock interview {self.id}: {self.passed}/{len(self.items)} passed in time, "
                f"{mmss(self.seconds)} of {self.minutes:g} min",
                f"{'item':<36}{'kind':<14}{'time':>7}{'hints':>7}  result"]
        for i in self.items:
            t = "-" if i.seconds is None else mmss(i.seconds)
            rows.append(f"{i.drill:<36}{i.kind:<14}{t:>7}{i.hints:>7}  {i.outcome}")
        return "\n".join(rows)

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def markdown(self) -> str:
        """Return the score sheet as a markdown table."""
        rows = "\n".join(f"| `{i.drill}` | {i.kind} | {'-' if i.seconds is None else mmss(i.seconds)} | {i.hints} | "
                         f"{i.outcome} |" for i in self.items)
        return (f"Score sheet: {self.passed}/{len(self.items)} passed in time, {mmss(self.seconds)} of "
                f"{self.minutes:g} min\n\n| item | kind | time | hints | result |\n|---|---|---|---|---|\n{rows}")

    def _repr_html_(self) -> str:
        colour = {"pass": "#1a7f37", "fail": "#cf222e", "gave up": "#cf222e"}
        rows = "".join(
            f"<tr><td><code>{html.escape(i.drill)}</code></td><td>{i.kind}</td><td>{i.topic}</td><td>{i.level}</td>"
            f"<td>{'-' if i.seconds is None else mmss(i.seconds)}</td><td>{i.hints}</td>"
            f"<td style='color:{colour.get(i.outcome, '#9a6700')}'>{html.escape(i.outcome)}</td></tr>"
            for i in self.items)
        return (f"<div><b>Score sheet</b>: {self.passed}/{len(self.items)} passed in time, "
                f"{mmss(self.seconds)} of {self.minutes:g} min<table><tr><th>item</th><th>kind</th><th>topic</th>"
                f"<th>level</th><th>time</th><th>hints</th><th>result</th></tr>{rows}</table></div>")


def deal(pool: Sequence[Drill], rng: random.Random) -> list[Drill]:
    """Pick one implement, one spot-the-bug, and a napkin + a concept (two of either when one kind is missing)."""
    by_kind: dict[str, list[Drill]] = {k: [d for d in pool if d.kind == k] for k in ORDER}
    for kind in ("implement", "spot_the_bug"):
        if not by_kind[kind]:
            raise ValueError(f"mock interview: no {kind} drill in the chosen topics; widen topics")
    questions = [rng.choice(by_kind[k]) for k in ("concept", "napkin") if by_kind[k]]
    if len(questions) < 2:
        rest = [d for d in by_kind["concept"] + by_kind["napkin"] if d not in questions]
        if not rest:
            raise ValueError("mock interview: the chosen topics have fewer than two napkin/concept questions")
        questions.append(rng.choice(rest))
    items = questions + [rng.choice(by_kind["spot_the_bug"]), rng.choice(by_kind["implement"])]
    return sorted(items, key=lambda d: ORDER.index(d.kind))


class MockInterview:
    """A dealt mock interview: ``show()``, ``submit(answer)``, ``give_up()``, ``finish()``; ``current`` is the item."""

    def __init__(self, items: Sequence[Drill], minutes: float, seed: int | None) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.minutes = float(minutes)
        self.seed = seed
        self.items = [d.fresh() for d in items]
        for d in self.items:
            d._mock = self
        self.start = time.monotonic()
        self._index = 0
        self._item_start = self.start
        self._outcome: dict[int, tuple[str, float]] = {}
        self._sheet: ScoreSheet | None = None

    # -------------------------------------------------------------- state
    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def time_left(self) -> float:
        """Seconds left (negative once over time)."""
        return self.minutes * 60 - self.elapsed

    @property
    def current(self) -> Drill | None:
        """Return the item being worked on, or None when the interview is over."""
        return self.items[self._index] if self._sheet is None and self._index < len(self.items) else None

    def _unlocked(self, drill: Drill) -> bool:
        """True once ``drill``'s item is over (passed, failed or given up) or the interview is finished."""
        if self._sheet is not None:
            return True
        i = self.items.index(drill)
        return i in self._outcome

    def _item_seconds(self, drill: Drill) -> float:
        """Seconds spent on ``drill``'s item: so far for the current one, as recorded for a closed one."""
        i = self.items.index(drill)
        if i in self._outcome:
            return self._outcome[i][1]
        return time.monotonic() - self._item_start if i == self._index else 0.0

    # -------------------------------------------------------------- doing
    def show(self) -> None:
        """Display the countdown and the current item (or the score sheet once it is over)."""
        if self._sheet is not None:
            self._display_sheet()
            return
        if in_notebook():
            from IPython.display import display

            from workbench.practice.render import countdown

            display(countdown(self.minutes * 60, self.start, "left in the interview"))
        else:
            print(f"{mmss(self.time_left)} left of {self.minutes:g} min")
        display_markdown(self._item_markdown())

    def _item_markdown(self) -> str:
        d = self.current
        return (f"**Item {self._index + 1} of {len(self.items)}** ({mmss(self.time_left)} left; hints are locked)"
                f"\n\n" + d._full_markdown().replace("d.submit(", "mock.submit("))

    def _ipython_display_(self) -> None:
        self.show()

    def __repr__(self) -> str:
        return (f"<MockInterview {self.id}: {len(self.items)} items, {self.minutes:g} min, "
                f"{mmss(self.time_left)} left, item {min(self._index + 1, len(self.items))}>")

    def submit(self, answer: Any) -> Result:
        """Grade the current item; a pass moves on to the next one (a fail stays: try again or give up)."""
        d = self.current
        if d is None:
            raise RuntimeError(f"mock interview {self.id} is over: see mock.finish()")
        res = d.submit(answer)
        if self._sheet is not None:
            res.follow_up = "**The interview is over.**\n\n" + self._sheet.markdown()
        elif self.current is not d:
            res.follow_up = self._item_markdown()
        return res

    def give_up(self) -> None:
        """Fail the current item (recorded) and move on; its hints unlock."""
        d = self.current
        if d is None:
            raise RuntimeError(f"mock interview {self.id} is over: see mock.finish()")
        d.give_up()
        if self._sheet is not None:
            self._display_sheet()
        else:
            display_markdown(self._item_markdown())

    def hint(self) -> str:
        """Hints are locked during a mock interview: this says so (``mock.items[i].hint()`` after the item)."""
        d = self.current
        return d.hint() if d is not None else "The interview is over: every item's hints are unlocked."

    def _after_submit(self, d: Drill, res: Result) -> None:
        if res.passed:
            self._close(d, "pass" if self.time_left >= 0 else "pass (over time)")

    def _after_give_up(self, d: Drill) -> None:
        self._close(d, "gave up")

    def _close(self, d: Drill, outcome: str) -> None:
        i = self.items.index(d)
        if i in self._outcome:
            return
        now = time.monotonic()
        self._outcome[i] = (outcome, now - self._item_start)
        if i == self._index:
            self._index += 1
            self._item_start = now
            if self._index >= len(self.items):
                self._score()

    def finish(self) -> ScoreSheet:
        """End the interview (items not reached count as such); display and return the score sheet."""
        self._score()
        self._display_sheet()
        return self._sheet

    def _score(self) -> None:
        if self._sheet is None:
            rows = []
            for i, d in enumerate(self.items):
                outcome, seconds = self._outcome.get(i, ("not reached", None))
                if outcome == "not reached" and d._attempts:
                    outcome = "fail"
                    seconds = time.monotonic() - self._item_start if i == self._index else None
                rows.append(ItemScore(d.id, d.kind, d.topic, d.level, seconds, d._hints_shown, outcome))
            self._sheet = ScoreSheet(self.id, self.minutes, self.elapsed, rows)

    def _display_sheet(self) -> None:
        if in_notebook():
            from IPython.display import display

            display(self._sheet)
        else:
            print(self._sheet.text())


def mock_interview(minutes: float = 45, topics: Sequence[str] | str | None = None, seed: int | None = None,
                   drills: Sequence[str] | None = None) -> MockInterview:
    """Deal a mock interview of ``minutes``: one implement, one spot-the-bug and two questions from ``topics``.

    ``seed`` makes the deal repeatable; ``drills`` (four ids) sets the items instead (an interviewer's pick).
    """
    from workbench.practice import catalogue

    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not 1 <= minutes <= 600:
        raise ValueError(f"mock_interview: minutes must be a number in [1, 600], got {minutes!r}")
    all_drills = catalogue()
    if drills is not None:
        if isinstance(drills, str) or not drills:
            raise ValueError("mock_interview: drills is a list of drill ids, e.g. the four an interviewer picked")
        unknown = [i for i in drills if i not in all_drills]
        if unknown:
            raise KeyError(f"mock_interview: unknown drill id(s) {unknown}")
        items = sorted((all_drills[i] for i in drills), key=lambda d: ORDER.index(d.kind))
    else:
        wanted = [topics] if isinstance(topics, str) else list(topics or TOPICS)
        bad = [t for t in wanted if t not in TOPICS]
        if bad:
            raise ValueError(f"mock_interview: unknown topic(s) {bad}; topics are {list(TOPICS)}")
        pool = [d for d in all_drills.values() if d.topic in wanted]
        items = deal(pool, random.Random(seed))
    return MockInterview(items, minutes, seed)
