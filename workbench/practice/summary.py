"""Progress: drills passed by topic and level, the weakest topics, from the events in the progress store.

A drill counts as *passed* when some attempt passed before its model answer was shown (a reveal, or a concept
drill's answer shown after a failed attempt); a pass after that counts as *passed after a reveal*. The weakest
topics are the practised ones with the lowest share of clean passes among the drills tried (ties: more failed
attempts first), then the topics not practised yet.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.base import LEVELS, TOPICS, Drill


@dataclass
class DrillStatus:
    """What the record says about one drill."""

    drill: Drill
    attempts: int = 0
    failed: int = 0
    passed: bool = False  # passed before any reveal
    passed_after_reveal: bool = False
    reveals: int = 0
    give_ups: int = 0
    best_seconds: float | None = None
    hints: int = 0

    @property
    def tried(self) -> bool:
        return bool(self.attempts or self.reveals or self.give_ups)


@dataclass
class TopicLine:
    """One topic's summary row."""

    topic: str
    total: int
    tried: int
    passed: int
    failed_attempts: int
    reveals: int
    by_level: dict[str, tuple[int, int]] = field(default_factory=dict)  # level -> (passed, total)

    def text(self) -> str:
        if not self.tried:
            return f"{self.topic}: not practised yet ({self.total} drills)"
        return (f"{self.topic}: {self.passed}/{self.tried} tried drills passed ({self.total} in all), "
                f"{self.failed_attempts} failed attempt(s), {self.reveals} reveal(s)")


def statuses(drills: dict[str, Drill], events: list[dict[str, Any]]) -> dict[str, DrillStatus]:
    """Fold the event log into one :class:`DrillStatus` per known drill (events of unknown drills are kept out)."""
    out = {i: DrillStatus(d) for i, d in drills.items()}
    revealed: set[str] = set()
    for e in events:
        s = out.get(e["drill"])
        if s is None:
            continue
        s.hints = max(s.hints, int(e.get("hints") or 0))
        if e["event"] == "reveal":
            s.reveals += 1
            revealed.add(e["drill"])
        elif e["event"] == "give_up":
            s.give_ups += 1
        elif e["event"] == "attempt":
            s.attempts += 1
            if e["passed"]:
                clean = e["drill"] not in revealed and not e.get("revealed_before")
                s.passed = s.passed or clean
                s.passed_after_reveal = s.passed_after_reveal or not clean
                if e.get("seconds") is not None:
                    s.best_seconds = e["seconds"] if s.best_seconds is None else min(s.best_seconds, e["seconds"])
            else:
                s.failed += 1
    return out


def topic_lines(st: dict[str, DrillStatus]) -> list[TopicLine]:
    """Return one :class:`TopicLine` per topic, in the topics' order."""
    lines = []
    for t in TOPICS:
        ss = [s for s in st.values() if s.drill.topic == t]
        by_level = {lv: (sum(s.passed for s in ss if s.drill.level == lv), sum(s.drill.level == lv for s in ss))
                    for lv in LEVELS}
        lines.append(TopicLine(t, len(ss), sum(s.tried for s in ss), sum(s.passed for s in ss),
                               sum(s.failed + s.give_ups for s in ss), sum(s.reveals for s in ss), by_level))
    return lines


def weakest(lines: list[TopicLine], n: int = 3) -> list[TopicLine]:
    """Return the ``n`` weakest topics: practised ones by share of clean passes, then the unpractised."""
    tried = sorted((t for t in lines if t.tried), key=lambda t: (t.passed / t.tried, -t.failed_attempts, t.topic))
    untried = [t for t in lines if not t.tried and t.total]
    return (tried + untried)[:n]


@dataclass
class Progress:
    """The learner's progress: ``figure()`` (plotly), ``text()`` (terminal), ``weakest()``; displays itself."""

    statuses: dict[str, DrillStatus]
    store_path: str
    pending: int = 0

    @property
    def topics(self) -> list[TopicLine]:
        return topic_lines(self.statuses)

    def weakest(self, n: int = 3) -> list[TopicLine]:
        """Return the ``n`` weakest topics."""
        return weakest(self.topics, n)

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.statuses.values())

    def figure(self) -> Any:
        """Return a plotly bar chart: drills passed per topic, stacked by level, against the drills there are."""
        import plotly.graph_objects as go

        lines = self.topics
        x = [t.topic for t in lines]
        fig = go.Figure()
        colours = {"easy": "#2da44e", "medium": "#bf8700", "hard": "#cf222e"}
        for lv in LEVELS:
            fig.add_bar(name=f"passed: {lv}", x=x, y=[t.by_level[lv][0] for t in lines], marker_color=colours[lv],
                        hovertemplate="%{x}: %{y} " + lv + " drill(s) passed<extra></extra>")
        fig.add_bar(name="not passed yet", x=x, y=[t.total - t.passed for t in lines], marker_color="#d0d7de",
                    hovertemplate="%{x}: %{y} drill(s) not passed yet<extra></extra>")
        fig.update_layout(barmode="stack", title=f"Drills passed by topic and level ({self.passed} of "
                                                 f"{len(self.statuses)})",
                          yaxis_title="drills", xaxis_title="topic", legend_title="", height=380,
                          margin={"l": 50, "r": 20, "t": 50, "b": 40})
        return fig

    def text(self) -> str:
        """Return the terminal version: a topic x level table and the weakest topics."""
        head = f"{'topic':<13}" + "".join(f"{lv:>9}" for lv in LEVELS) + f"{'all':>9}  tried  failed  reveals"
        rows = [head, "-" * len(head)]
        for t in self.topics:
            cells = "".join(f"{f'{p}/{n}':>9}" for p, n in (t.by_level[lv] for lv in LEVELS))
            rows.append(f"{t.topic:<13}{cells}{f'{t.passed}/{t.total}':>9}  {t.tried:>5}  {t.failed_attempts:>6}  "
                        f"{t.reveals:>7}")
        rows.append("")
        rows.append(f"passed: {self.passed} of {len(self.statuses)} drills (a pass after a reveal does not count)")
        rows.append("weakest topics:")
        rows += [f"  {i}. {t.text()}" for i, t in enumerate(self.weakest(), 1)]
        rows.append(f"record: {self.store_path}" + (f" ({self.pending} event(s) not written yet)" if self.pending
                                                     else ""))
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.text()

    __repr__ = __str__

    def _ipython_display_(self) -> None:
        self.show()

    def show(self) -> None:
        """Display the chart and the weakest topics (or print the terminal version outside a notebook)."""
        from workbench.practice.render import in_notebook

        if in_notebook():
            from IPython.display import HTML, display

            display(self.figure())
            weak = "".join(f"<li>{html.escape(t.text())}</li>" for t in self.weakest())
            display(HTML(f"<p><b>Weakest topics</b></p><ol>{weak}</ol>"
                         f"<p style='color:#57606a'>record: {html.escape(self.store_path)}</p>"))
        else:
            print(self.text())


def progress(drills: dict[str, Drill] | None = None) -> Progress:
    """Return the :class:`Progress` of every drill from the store (raises naming the file if it is unreadable)."""
    from workbench.practice import store
    from workbench.practice.loading import load_all

    drills = drills if drills is not None else load_all()
    return Progress(statuses(drills, store.events()), str(store.path()), store.pending())
