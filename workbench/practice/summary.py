"""Progress: mastery per topic over the drills and the exercises, and what to do next, from the progress store.

A drill or exercise counts as *passed* (a clean pass) when some attempt passed in time before its model answer was
seen: ``reveal()``, a learner's ``model_answer()``, an exercise's ``solution()``, or a concept drill's answer
shown after a failed attempt. A pass after one of those counts as *passed after a reveal*, a pass over the clock
of a timed attempt or a mock interview as *passed over time*: both are marked passes, worth half a clean one in
mastery. A self-assessed answer (a learner's own mark against a rubric) is never a pass.

A topic's *mastery* is the credit (clean pass 1, marked pass 1/2) over the items tried in it; its *coverage* is the
share of its items tried. The weakest topics are the practised ones not mastered, lowest mastery first (ties: more
failed attempts first), then the topics not practised yet, then the mastered ones; the mock interview deals from
them in that order.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.base import LEVELS, TOPICS

#: The practice topic of each op's exercises (drills carry their own topic in drills.toml).
OP_TOPICS = {"vecadd": "memory", "transpose": "memory", "gemm": "gemm", "gemm_fp8": "tensor-cores",
             "softmax": "softmax", "rmsnorm": "softmax", "attention": "attention", "attention_bwd": "attention",
             "moe": "moe", "moe_align": "moe", "moe_topk": "moe", "moe_fp8": "tensor-cores",
             "gemm_fp8_block": "tensor-cores", "decode_attention": "attention", "lse_merge": "attention"}

MARKED_CREDIT = 0.5  # a pass after a reveal or over time, against 1 for a clean pass
SELF_REDO = 0.75  # a self-assessed answer marked below this share of its rubric is listed to redo


def op_topic(op: str) -> str:
    """Return the practice topic of ``op``: :data:`OP_TOPICS`, else the commonest topic of the op's drills.

    Raises naming the op when it has neither.
    """
    if op in OP_TOPICS:
        return OP_TOPICS[op]
    from collections import Counter

    from workbench.practice import catalogue

    seen = Counter(d.topic for d in catalogue().values() if d.op == op)
    if not seen:
        raise KeyError(f"progress: op {op!r} has no practice topic and no drills; add it to "
                       f"workbench.practice.summary.OP_TOPICS (topics: {list(TOPICS)})")
    return seen.most_common(1)[0][0]


@dataclass(frozen=True)
class ExerciseItem:
    """What the summary needs of an exercise: it is tracked like a drill of kind ``exercise``."""

    id: str  # "exercise:<id>", as the store records it
    topic: str
    title: str
    op: str
    kind: str = "exercise"
    level: str = "exercise"

    @property
    def open_code(self) -> str:
        return f"wb.exercise({self.id.split(':', 1)[1]!r})"


def exercise_items() -> dict[str, ExerciseItem]:
    """Return every registered exercise as an :class:`ExerciseItem`, by its store id."""
    from workbench.practice.exercises import _EXERCISES, _load_all

    _load_all()
    return {f"exercise:{e.id}": ExerciseItem(f"exercise:{e.id}", op_topic(e.op), e.title, e.op)
            for e in _EXERCISES.values()}


def _open_code(item: Any) -> str:
    return getattr(item, "open_code", None) or f"wb.drill({item.id!r})"


@dataclass
class DrillStatus:
    """What the record says about one drill or exercise (``drill`` is the :class:`Drill` or :class:`ExerciseItem`)."""

    drill: Any
    attempts: int = 0
    failed: int = 0
    passed: bool = False  # a clean pass: in time, before any reveal
    passed_after_reveal: bool = False
    passed_over_time: bool = False
    reveals: int = 0
    give_ups: int = 0
    best_seconds: float | None = None
    hints: int = 0
    self_scores: list[float] = field(default_factory=list)  # self-assessed marks (0..1), oldest first
    follow_ups: dict[str, bool] = field(default_factory=dict)  # a mock interview's follow-up ("bfloat16") -> passed

    @property
    def tried(self) -> bool:
        return bool(self.attempts or self.reveals or self.give_ups or self.self_scores)

    @property
    def marked_pass(self) -> bool:
        """True when the only passes came after a reveal or over time."""
        return not self.passed and (self.passed_after_reveal or self.passed_over_time)

    @property
    def credit(self) -> float:
        """Return 1 for a clean pass, :data:`MARKED_CREDIT` for a marked one, else 0."""
        return 1.0 if self.passed else MARKED_CREDIT if self.marked_pass else 0.0

    @property
    def state(self) -> str:
        """Return one word for the record: passed, marked, self-assessed, failed, seen or unseen."""
        if self.passed:
            return "passed"
        if self.marked_pass:
            return "marked"
        if self.failed or self.give_ups:
            return "failed"
        if self.self_scores:
            return "self-assessed"
        return "seen" if self.tried else "unseen"

    def mark(self) -> str:
        """Return what marks the pass: 'after a reveal', 'over time', both, or ''."""
        if not self.marked_pass:
            return ""
        return " and ".join(w for w, on in (("after a reveal", self.passed_after_reveal),
                                             ("over time", self.passed_over_time)) if on)


def _fold(s: DrillStatus, e: dict[str, Any], revealed: set[str]) -> None:
    """Fold one event into its item's status."""
    s.hints = max(s.hints, int(e.get("hints") or 0))
    kind = e["event"]
    if kind == "reveal":
        s.reveals += 1
        revealed.add(e["drill"])
    elif kind == "give_up":
        s.give_ups += 1
    elif kind == "self_assessed":
        if e.get("score") is not None:
            s.self_scores.append(float(e["score"]))
    elif kind == "attempt":
        s.attempts += 1
        if not e["passed"]:
            s.failed += 1
            return
        after_reveal = e["drill"] in revealed or bool(e.get("revealed_before"))
        over = bool(e.get("over_time"))
        s.passed = s.passed or not (after_reveal or over)
        s.passed_after_reveal = s.passed_after_reveal or after_reveal
        s.passed_over_time = s.passed_over_time or (over and not after_reveal)
        if e.get("seconds") is not None:
            s.best_seconds = e["seconds"] if s.best_seconds is None else min(s.best_seconds, e["seconds"])


def statuses(drills: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, DrillStatus]:
    """Fold the event log into one :class:`DrillStatus` per known item (events of unknown ids are kept out)."""
    out = {i: DrillStatus(d) for i, d in drills.items()}
    revealed: set[str] = set()
    for e in events:
        s = out.get(e["drill"])
        if s is not None:
            _fold(s, e, revealed)
            continue
        parent, _, change = e["drill"].partition("+")  # a follow-up: "<drill>+<change>" (workbench.practice.mock)
        if change and parent in out and e["event"] == "attempt":
            fu = out[parent].follow_ups
            fu[change] = fu.get(change, False) or bool(e["passed"])
    return out


@dataclass
class TopicLine:
    """One topic's summary row: drills by level, exercises, mastery and coverage."""

    topic: str
    total: int
    tried: int
    passed: int  # clean passes
    failed_attempts: int
    reveals: int
    by_level: dict[str, tuple[int, int]] = field(default_factory=dict)  # level -> (passed, total); "exercise" too
    marked: int = 0  # passes only after a reveal or over time
    credit: float = 0.0

    @property
    def mastery(self) -> float | None:
        """Return the credit over the items tried (0..1), None when nothing was tried."""
        return self.credit / self.tried if self.tried else None

    @property
    def coverage(self) -> float:
        return self.tried / self.total if self.total else 0.0

    def text(self) -> str:
        if not self.tried:
            return f"{self.topic}: not practised yet ({self.total} items)"
        marked = f", {self.marked} passed only after a reveal or over time" if self.marked else ""
        return (f"{self.topic}: mastery {100 * self.mastery:.0f}% over {self.tried} tried of {self.total} "
                f"({self.passed} clean pass(es){marked}; {self.failed_attempts} failed attempt(s), "
                f"{self.reveals} reveal(s))")


def topic_lines(st: dict[str, DrillStatus]) -> list[TopicLine]:
    """Return one :class:`TopicLine` per topic, in the topics' order."""
    lines = []
    for t in TOPICS:
        ss = [s for s in st.values() if s.drill.topic == t]
        by_level = {lv: (sum(s.passed for s in ss if s.drill.level == lv), sum(s.drill.level == lv for s in ss))
                    for lv in (*LEVELS, "exercise")}
        lines.append(TopicLine(t, len(ss), sum(s.tried for s in ss), sum(s.passed for s in ss),
                               sum(s.failed + s.give_ups for s in ss), sum(s.reveals for s in ss), by_level,
                               sum(s.marked_pass for s in ss), sum(s.credit for s in ss)))
    return lines


def weakest(lines: list[TopicLine], n: int = 3) -> list[TopicLine]:
    """Return the ``n`` weakest topics: practised ones not mastered (lowest mastery first, then more failed
    attempts), then the ones not practised yet, then the mastered ones (every tried item passed cleanly)."""
    weak = sorted((t for t in lines if t.tried and t.mastery < 1), key=lambda t: (t.mastery, -t.failed_attempts,
                                                                                     t.topic))
    fresh = [t for t in lines if not t.tried and t.total]
    done = sorted((t for t in lines if t.tried and t.mastery >= 1), key=lambda t: (-t.failed_attempts, t.topic))
    return (weak + fresh + done)[:n]


def _level_rank(s: DrillStatus) -> int:
    return {"easy": 0, "medium": 1, "hard": 2}.get(s.drill.level, 1)


@dataclass
class Progress:
    """The learner's progress: ``text()``, ``figure()``, ``weakest()``, ``next_steps()``; displays itself."""

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
        """Return the number of clean passes (drills and exercises)."""
        return sum(s.passed for s in self.statuses.values())

    def redo(self) -> list[DrillStatus]:
        """Return the items to do again: failed (never passed) or passed only after a reveal or over time.

        Weakest topics first, then failed before marked.
        """
        order = {t.topic: i for i, t in enumerate(self.weakest(len(TOPICS)))}
        todo = [s for s in self.statuses.values() if s.state in ("failed", "marked", "seen")
                or (s.state == "self-assessed" and s.self_scores[-1] < SELF_REDO)]
        return sorted(todo, key=lambda s: (order.get(s.drill.topic, len(TOPICS)), s.state != "failed",
                                           _level_rank(s), s.drill.id))

    def unseen(self, topic: str | None = None) -> list[DrillStatus]:
        """Return the items never tried (in ``topic``, if given), easiest first."""
        return sorted((s for s in self.statuses.values() if not s.tried and (topic is None or s.drill.topic == topic)),
                      key=lambda s: (_level_rank(s), s.drill.kind == "exercise", s.drill.id))

    def next_steps(self) -> list[str]:
        """Return what to do next, most useful first, each with the call that opens it."""
        steps = []
        weak = self.weakest(2)
        if weak and weak[0].tried:
            t = weak[0]
            steps.append(f"Weakest topic: {t.topic} (mastery {100 * t.mastery:.0f}% over {t.tried} tried).")
        redo = self.redo()
        for s in redo[:4]:
            why = (f"failed {s.failed + s.give_ups}x, not passed yet" if s.state == "failed" else
                   f"passed only {s.mark()}" if s.state == "marked" else
                   f"self-assessed at {100 * s.self_scores[-1]:.0f}%" if s.state == "self-assessed" else
                   "answer seen, never submitted")
            steps.append(f"Redo {s.drill.id} ({s.drill.topic}, {why}): {_open_code(s.drill)}")
        if len(redo) > 4:
            steps.append(f"... and {len(redo) - 4} more to redo (Progress.redo() lists them).")
        for s in self.statuses.values():
            missed = [k for k, ok in s.follow_ups.items() if not ok]
            if missed:
                steps.append(f"Follow-up not passed yet: {s.drill.id} under {', '.join(missed)} (a mock "
                             f"interview's change of the problem): {_open_code(s.drill)}")
        for t in weak:
            fresh = self.unseen(t.topic)
            if fresh:
                steps.append(f"Unseen in {t.topic}: {len(fresh)} item(s); start with {fresh[0].drill.id} "
                             f"({fresh[0].drill.level} {fresh[0].drill.kind.replace('_', '-')}): "
                             f"{_open_code(fresh[0].drill)}")
        n_unseen = len(self.unseen())
        if n_unseen:
            steps.append(f"{n_unseen} of {len(self.statuses)} drills and exercises never tried.")
        if weak:
            steps.append(f"A mock interview on the weak spots: wb.mock_interview(topics={[t.topic for t in weak]})")
        return steps

    def figure(self) -> Any:
        """Return a plotly bar chart: clean passes per topic (by level, exercises), marked passes, the rest."""
        import plotly.graph_objects as go

        lines = self.topics
        x = [t.topic for t in lines]
        fig = go.Figure()
        colours = {"easy": "#2da44e", "medium": "#bf8700", "hard": "#cf222e", "exercise": "#0969da"}
        for lv in (*LEVELS, "exercise"):
            what = "exercises" if lv == "exercise" else f"{lv} drills"
            fig.add_bar(name=f"passed: {what}", x=x, y=[t.by_level[lv][0] for t in lines], marker_color=colours[lv],
                        hovertemplate="%{x}: %{y} " + what + " passed<extra></extra>")
        fig.add_bar(name="passed after a reveal / over time", x=x, y=[t.marked for t in lines],
                    marker_color="#d4a72c", marker_pattern_shape="/",
                    hovertemplate="%{x}: %{y} passed only after a reveal or over time<extra></extra>")
        fig.add_bar(name="not passed yet", x=x, y=[t.total - t.passed - t.marked for t in lines],
                    marker_color="#d0d7de", hovertemplate="%{x}: %{y} not passed yet<extra></extra>")
        fig.update_layout(barmode="stack", title=f"Passed by topic: {self.passed} of {len(self.statuses)} drills "
                                                 "and exercises", yaxis_title="drills and exercises",
                          xaxis_title="topic", legend_title="", height=400, margin={"l": 50, "r": 20, "t": 50, "b": 40})
        return fig

    def text(self) -> str:
        """Return the terminal version: a topic table (levels, exercises, mastery) and the next steps."""
        head = (f"{'topic':<13}" + "".join(f"{lv:>8}" for lv in LEVELS) + f"{'exerc.':>8}{'all':>8}  mastery  "
                "tried  failed  reveals")
        rows = [head, "-" * len(head)]
        for t in self.topics:
            cells = "".join(f"{f'{p}/{n}':>8}" for p, n in (t.by_level[lv] for lv in (*LEVELS, "exercise")))
            m = "-" if t.mastery is None else f"{100 * t.mastery:.0f}%"
            rows.append(f"{t.topic:<13}{cells}{f'{t.passed}/{t.total}':>8}  {m:>7}  {t.tried:>5}  "
                        f"{t.failed_attempts:>6}  {t.reveals:>7}")
        marked = sum(t.marked for t in self.topics)
        rows += ["", f"clean passes: {self.passed} of {len(self.statuses)} drills and exercises"
                     + (f"; {marked} more passed only after a reveal or over time (half credit)" if marked else ""),
                 "weakest topics:"]
        rows += [f"  {i}. {t.text()}" for i, t in enumerate(self.weakest(), 1)]
        selfs = [s for s in self.statuses.values() if s.self_scores]
        if selfs:
            rows.append("self-assessed (never a pass): " + ", ".join(f"{s.drill.id} {100 * s.self_scores[-1]:.0f}%"
                                                                    for s in selfs))
        rows.append("next:")
        rows += [f"  - {s}" for s in self.next_steps()]
        rows.append(f"record: {self.store_path}" + (f" ({self.pending} event(s) not written yet)" if self.pending
                                                     else ""))
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.text()

    __repr__ = __str__

    def _ipython_display_(self) -> None:
        self.show()

    def html(self) -> str:
        """Return the mastery table and the next steps as HTML (the notebook display, below the chart)."""
        rows = []
        for t in self.topics:
            m = "-" if t.mastery is None else f"{100 * t.mastery:.0f}%"
            bar = "" if t.mastery is None else (f"<div style='background:#2da44e;height:8px;width:"
                                               f"{max(2, int(80 * t.mastery))}px'></div>")
            rows.append(f"<tr><td>{t.topic}</td><td>{m}{bar}</td><td>{t.tried}/{t.total}</td><td>{t.passed}</td>"
                        f"<td>{t.marked}</td><td>{t.failed_attempts}</td><td>{t.reveals}</td></tr>")
        steps = "".join(f"<li>{html.escape(s)}</li>" for s in self.next_steps())
        return (f"<table><tr><th>topic</th><th>mastery</th><th>tried</th><th>clean passes</th>"
                f"<th>after reveal / over time</th><th>failed attempts</th><th>reveals</th></tr>{''.join(rows)}"
                f"</table><p><b>Next</b></p><ol>{steps}</ol>"
                f"<p style='color:#57606a'>record: {html.escape(self.store_path)}</p>")

    def show(self) -> None:
        """Display the chart, the mastery table and the next steps (or print the terminal version)."""
        from workbench.practice.render import in_notebook

        if in_notebook():
            from IPython.display import HTML, display

            display(self.figure())
            display(HTML(self.html()))
        else:
            print(self.text())


def progress(drills: dict[str, Any] | None = None, exercises: bool = True) -> Progress:
    """Return the :class:`Progress` of every drill (and exercise) from the store (raises naming an unreadable file)."""
    from workbench.practice import store
    from workbench.practice.loading import load_all

    items: dict[str, Any] = dict(drills if drills is not None else load_all())
    if exercises:
        items.update(exercise_items())
    return Progress(statuses(items, store.events()), str(store.path()), store.pending())
