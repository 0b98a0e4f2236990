"""Mock interviews: one implement drill and its follow-up, one spot-the-bug drill and two questions, on one clock.

The two questions are a concept drill and a napkin estimate or a profile to read (whichever the record puts first).

``wb.mock_interview(minutes=45, topics=..., seed=...)`` deals from the record: the topics with the lowest mastery
first (then the ones not practised yet), and in them the drills failed or passed only after a reveal, then the
unseen ones; a drill already passed cleanly is dealt only when nothing else is left. Work through the items in
order: ``mock.submit(answer)`` grades the current one and moves on when it passes; a wrong answer stays on the item
and is kept (in the progress store and on the sheet); ``mock.give_up()`` fails it and moves on (its hints unlock).

When the implement item passes, the interviewer changes the problem: a follow-up re-checks the same function with
the drill's own checker under another dtype ("now in bfloat16"), another value of one of the op's flags ("now with
causal=True") or larger ragged shapes, whichever the model answer supports here (:func:`follow_ups`).

``mock.finish()`` (or the last item) gives the score sheet: time, attempts and result per item, written feedback
per topic and a suggested next session. Every attempt goes to the progress store, tagged with the interview's id.
"""

from __future__ import annotations

import copy
import dataclasses
import html
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.base import TOPICS, Drill, Result
from workbench.practice.render import display_markdown, in_notebook, mmss

ORDER = ("concept", "napkin", "profile", "spot_the_bug", "implement")  # warm-up questions first, the coding last
QUESTION_SLOTS = (("concept",), ("napkin", "profile"))  # the two questions: a concept, then a number or a profile
PREFERRED_DTYPES = ("bfloat16", "float16", "float32")  # a dtype follow-up asks for the first one the drill lacks
SIZE_KEYS = {"M", "N", "K", "T", "Sq", "Sk"}  # shape keys a "larger, ragged" follow-up grows (plain sizes)

ADVICE = {
    "napkin": "write the units of every factor before multiplying; the drill's hints name what to count",
    "concept": "read the explanation shown after the attempt, then try the topic's unseen concept drills",
    "spot_the_bug": "run the listing by hand on the smallest input the feedback shows, one thread at a time",
    "implement": "write it again from the blank page, untimed, and read the checker's first failure before "
                 "changing code",
    "profile": "name the counter that is far from its ideal first, then the one change that moves it",
    "follow-up": "change one thing at a time for the new condition and re-run the check",
}


# ----------------------------------------------------------------------------------------------- follow-ups


@dataclass(frozen=True)
class FollowUp:
    """A change of an implement drill's problem, re-checked by the same checker: what the interviewer says."""

    key: str  # "bfloat16", "causal=True", "larger"
    prompt: str  # markdown: the interviewer's words
    dtypes: tuple[str, ...] | None = None  # None: the drill's own
    shapes: tuple[dict, ...] | None = None  # None: the drill's own
    keep_budgets: bool = True

    def apply(self, d: Drill) -> Drill:
        """Return a copy of implement drill ``d`` with this change (id ``<drill>+<key>``), a fresh handle."""
        fu = copy.copy(d).fresh()
        fu.id = f"{d.id}+{self.key}"
        fu.title = f"Follow-up to {d.id}: {self.key}"
        fu.task = f"**Follow-up.** {self.prompt}\n\n{d.task}"
        if self.dtypes is not None:
            fu.dtypes = tuple(self.dtypes)
            if getattr(fu, "inspect", None) is not None:  # a drill graded by its compiled code: compile that dtype
                fu.inspect = dataclasses.replace(fu.inspect, dtype=self.dtypes[0])
        if self.shapes is not None:
            fu.shapes = tuple(dict(s) for s in self.shapes)
        if not self.keep_budgets:
            fu.budgets = {}
            fu.budget_shape = None
        return fu


def _shapes_of(d: Drill) -> list[dict]:
    import workbench as wb

    return [dict(s) for s in (d.shapes if d.shapes is not None else wb.get_op(d.op).check_shapes)]


def _runs_here(variant: Any, dtype: str, shapes: list[dict]) -> bool:
    return all(variant.why_not_here(dtype, s) is None for s in shapes)


def _judged_here(d: Drill, variant: Any, dtype: str, shapes: list[dict]) -> bool:
    """True when the drill can judge ``dtype`` here: the model runs it, or the compiled code is the verdict here."""
    rule = getattr(d, "inspect", None)
    if rule is not None and not rule.run:
        from workbench import MODE

        if MODE != "gpu":
            return True  # graded by the compiler without a GPU (workbench.practice.hopper)
    return _runs_here(variant, dtype, shapes)


def _dtype_follow_up(d: Drill, variant: Any, shapes: list[dict]) -> FollowUp | None:
    from workbench.registry import dtype_name

    have = set(d.checked_dtypes())
    supported = {dtype_name(t) for t in variant.dtypes}
    for dt in PREFERRED_DTYPES:
        if dt not in have and dt in supported and _judged_here(d, variant, dt, shapes):
            low = dt in ("bfloat16", "float16")
            how = ("accumulate in float32 and convert once, on the store; the checker's tolerance is the one for "
                   f"{dt}" if low else "every intermediate is float32 now; the tolerance is tighter")
            return FollowUp(dt, f"Now in **{dt}**: the same contract with {dt} inputs and outputs ({how}). Submit "
                                "your function again, changed if it needs to be. (The performance budgets are left "
                                "out of this follow-up.)", dtypes=(dt,), keep_budgets=False)
    return None


def _flag_follow_ups(d: Drill, spec: Any, shapes: list[dict]) -> list[FollowUp]:
    out = []
    for flag, values in spec.flags.items():
        used = {s.get(flag, values[0]) for s in shapes}
        for v in values:
            if v not in used:
                out.append(FollowUp(f"{flag}={v!r}", f"Now with **{flag}={v!r}**: every shape of the check runs "
                                                     f"with it (the drill checked {flag}={sorted(map(repr, used))[0]} "
                                                     "only). Submit your function again, changed if it needs to be.",
                                    shapes=tuple({**s, flag: v} for s in shapes)))
    return out


def _larger_follow_up(d: Drill, spec: Any, variant: Any, shapes: list[dict]) -> FollowUp | None:
    grow = [k for k in spec.shape_keys if k in SIZE_KEYS]  # the others (E, top_k, block, D) stay as they are
    if not grow:
        return None

    def cost(s: dict) -> int:
        n = 1
        for k in spec.shape_keys:
            n *= int(s.get(k, 1))
        return n

    big = sorted(shapes, key=cost)[-2:]
    grown = tuple({k: (2 * v + 3 if k in grow else v) for k, v in s.items()} for s in big)
    if not all(_runs_here(variant, dt, list(grown)) for dt in d.checked_dtypes()):
        return None
    sizes = "; ".join(", ".join(f"{k}={s[k]}" for k in spec.shape_keys if k in s) for s in grown)
    return FollowUp("larger", f"Now **larger and ragged**: {sizes} ({', '.join(grow)} grown to 2n + 3: past "
                              "more tiles and off a power of two). Does your grid still cover every element, and is "
                              "every load and store still masked? Submit your function again.", shapes=grown)


def follow_ups(d: Drill) -> list[FollowUp]:
    """Return the follow-ups an interviewer can pose after implement drill ``d`` passes (at least one per drill).

    A dtype the drill did not check and the model answer runs here, then each flag value the drill's shapes never
    use, then (for plain-size ops only, when neither exists) the two largest shapes grown to 2n + 3.
    """
    import workbench as wb

    if d.kind != "implement":
        return []
    spec, variant = wb.get_op(d.op), d.model_answer()
    shapes = _shapes_of(d)
    out = [f for f in [_dtype_follow_up(d, variant, shapes)] if f is not None]
    out += _flag_follow_ups(d, spec, shapes)
    if not out:
        grown = _larger_follow_up(d, spec, variant, shapes)
        out += [grown] if grown is not None else []
    return out


# ----------------------------------------------------------------------------------------------- the sheet


@dataclass
class ItemScore:
    """One row of the score sheet."""

    drill: str
    kind: str  # the drill's kind, or "follow-up"
    topic: str
    level: str
    seconds: float | None
    hints: int
    outcome: str  # "pass", "pass (over time)", "pass (answer seen before)", "fail", "gave up", "self-assessed 75%",
    #               "not reached"
    attempts: int = 0
    wrong: list[str] = field(default_factory=list)  # what each wrong attempt was told (first line)

    @property
    def passed(self) -> bool:
        """True for a clean pass: in time, answer not seen (wrong attempts before it are on the sheet)."""
        return self.outcome == "pass"

    @property
    def tries(self) -> str:
        return "-" if not self.attempts else f"{self.attempts}" + (f" ({len(self.wrong)} wrong)" if self.wrong else "")


def _verdict(items: list[ItemScore]) -> str:
    if all(i.passed and not i.wrong for i in items):
        return "solid"
    if all(i.passed for i in items):
        return "passed, after wrong attempts"
    if any(i.outcome in ("fail", "gave up") for i in items):
        return "weak"
    return "unfinished"


def _item_sentence(i: ItemScore) -> str:
    what = "follow-up" if i.kind == "follow-up" else i.kind.replace("_", "-")
    t = "" if i.seconds is None else f" in {mmss(i.seconds)}"
    if i.outcome == "not reached":
        return f"`{i.drill}` ({what}): not reached."
    told = " / ".join(w.rstrip(".") for w in i.wrong)
    wrong = f"; the wrong attempt{'s were' if len(i.wrong) > 1 else ' was'} told: {told}" if i.wrong else ""
    if i.passed:
        nth = "on the first attempt" if not i.wrong else f"on attempt {i.attempts}"
        return f"`{i.drill}` ({what}): passed {nth}{t}{wrong}."
    if not i.attempts:
        return f"`{i.drill}` ({what}): {i.outcome} without an answer{t}."
    return f"`{i.drill}` ({what}): {i.outcome}{t} after {i.attempts} attempt(s){wrong}."


@dataclass
class ScoreSheet:
    """The end of a mock interview: one :class:`ItemScore` per item, feedback per topic and a next session."""

    id: str
    minutes: float
    seconds: float
    items: list[ItemScore]
    topics: list[str] = field(default_factory=list)  # the topics the interview was dealt from
    next_drills: list[str] = field(default_factory=list)  # unseen drills in the weak topics, for the next session
    _shown_in: Any = field(default=None, repr=False)  # the notebook cell that displayed it (not again there)

    @property
    def passed(self) -> int:
        return sum(i.passed for i in self.items)

    def topic_feedback(self) -> dict[str, str]:
        """Return written feedback per topic: what happened to each item, and what to practise."""
        out = {}
        for topic in dict.fromkeys(i.topic for i in self.items):
            items = [i for i in self.items if i.topic == topic]
            verdict = _verdict(items)
            lines = [f"**{topic}: {verdict}.** " + " ".join(_item_sentence(i) for i in items)]
            weak = [i for i in items if not i.passed or i.wrong]
            for i in weak:
                kind = "follow-up" if i.kind == "follow-up" else i.kind
                lines.append(f"Next for `{i.drill}`: {ADVICE.get(kind, ADVICE['implement'])}.")
            out[topic] = " ".join(lines)
        return out

    def weak_topics(self) -> list[str]:
        """Return the topics with an item not passed cleanly, weakest first."""
        rank = {"weak": 0, "unfinished": 1, "passed, after wrong attempts": 2}
        by_topic = {t: [i for i in self.items if i.topic == t] for t in dict.fromkeys(i.topic for i in self.items)}
        weak = [(rank[_verdict(v)], t) for t, v in by_topic.items() if _verdict(v) != "solid"]
        return [t for _, t in sorted(weak)]

    def next_session(self) -> str:
        """Return the suggested next session: what to redo, then the interview to deal."""
        redo = [i.drill.split("+")[0] for i in self.items if not i.passed or i.wrong]
        redo = list(dict.fromkeys(redo))
        weak = self.weak_topics()
        over = self.seconds > self.minutes * 60 or any(i.outcome == "not reached" for i in self.items)
        parts = []
        if redo:
            parts.append("Redo untimed, with hints: " + ", ".join(f"`wb.drill({r!r})`" for r in redo) + ".")
        if self.next_drills:
            parts.append("Then the unseen: " + ", ".join(f"`{r}`" for r in self.next_drills) + ".")
        minutes = self.minutes if over or weak else max(15, round(self.minutes * 0.75))
        topics = weak or [t for t in TOPICS if t not in self.topics][:2] or list(self.topics)
        why = ("the same length: the clock ran out or items were not reached" if over else
               "shorter: this one went well" if not weak else "on the topics that went wrong")
        parts.append(f"Next interview ({why}): `wb.mock_interview(minutes={minutes:g}, topics={topics})`.")
        return " ".join(parts)

    def text(self) -> str:
        from workbench.practice.render import markdown_to_text

        rows = [f"mock interview {self.id}: {self.passed}/{len(self.items)} passed cleanly in time, "
                f"{mmss(self.seconds)} of {self.minutes:g} min",
                f"{'item':<44}{'kind':<13}{'time':>7}{'tries':>13}{'hints':>6}  result"]
        for i in self.items:
            t = "-" if i.seconds is None else mmss(i.seconds)
            rows.append(f"{i.drill:<44}{i.kind:<13}{t:>7}{i.tries:>13}{i.hints:>6}  {i.outcome}")
        rows += ["", "feedback:"] + [f"  {markdown_to_text(v)}" for v in self.topic_feedback().values()]
        rows += ["", f"next session: {markdown_to_text(self.next_session())}"]
        return "\n".join(rows)

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def markdown(self) -> str:
        """Return the score sheet as markdown: the table, the feedback per topic, the next session."""
        rows = "\n".join(f"| `{i.drill}` | {i.kind} | {'-' if i.seconds is None else mmss(i.seconds)} | {i.tries} | "
                         f"{i.hints} | {i.outcome} |" for i in self.items)
        feedback = "\n".join(f"- {v}" for v in self.topic_feedback().values())
        return (f"Score sheet: {self.passed}/{len(self.items)} passed cleanly in time, {mmss(self.seconds)} of "
                f"{self.minutes:g} min\n\n| item | kind | time | tries | hints | result |\n|---|---|---|---|---|---|\n"
                f"{rows}\n\n**Feedback**\n\n{feedback}\n\n**Next session.** {self.next_session()}")

    def _repr_html_(self) -> str:
        colour = {"pass": "#1a7f37", "fail": "#cf222e", "gave up": "#cf222e"}
        rows = "".join(
            f"<tr><td><code>{html.escape(i.drill)}</code></td><td>{i.kind}</td><td>{i.topic}</td><td>{i.level}</td>"
            f"<td>{'-' if i.seconds is None else mmss(i.seconds)}</td><td>{html.escape(i.tries)}</td><td>{i.hints}</td>"
            f"<td style='color:{colour.get(i.outcome, '#9a6700')}'>{html.escape(i.outcome)}</td></tr>"
            for i in self.items)
        from workbench.practice.render import markdown_to_text

        feedback = "".join(f"<li>{html.escape(markdown_to_text(v))}</li>" for v in self.topic_feedback().values())
        return (f"<div><b>Score sheet</b>: {self.passed}/{len(self.items)} passed cleanly in time, "
                f"{mmss(self.seconds)} of {self.minutes:g} min<table><tr><th>item</th><th>kind</th><th>topic</th>"
                f"<th>level</th><th>time</th><th>tries</th><th>hints</th><th>result</th></tr>{rows}</table>"
                f"<p><b>Feedback</b></p><ul>{feedback}</ul><p><b>Next session.</b> "
                f"{html.escape(markdown_to_text(self.next_session()))}</p></div>")

    def _ipython_display_(self) -> None:
        """Display the sheet, unless this very cell displayed it already (``finish()`` shows it, then returns it)."""
        cell = _cell()
        if cell is not None and cell == self._shown_in:
            return
        if in_notebook():
            from IPython.display import HTML, display

            display(HTML(self._repr_html_()))
        else:
            print(self.text())


def _cell() -> int | None:
    """Return IPython's execution count (the cell being run), None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return getattr(get_ipython(), "execution_count", None)


# ----------------------------------------------------------------------------------------------- dealing


def _drill_rank(status: Any) -> int:
    """Return 0 for a drill to redo (failed, passed only after a reveal), 1 unseen, 2 self-assessed, 3 passed."""
    if status is None:
        return 1
    return {"failed": 0, "marked": 0, "seen": 0, "unseen": 1, "self-assessed": 2}.get(status.state, 3)


def topic_order(progress: Any) -> dict[str, int]:
    """Return each topic's dealing rank, weakest first (:func:`workbench.practice.summary.weakest`): practised
    topics not mastered, lowest mastery first, then the ones not practised yet, then the mastered ones."""
    return {t.topic: i for i, t in enumerate(progress.weakest(len(TOPICS)))}


def deal(pool: Sequence[Drill], rng: random.Random, progress: Any = None) -> list[Drill]:
    """Pick one implement, one spot-the-bug, a concept and a napkin or profile question (two of the questions'
    kinds when one is missing).

    With ``progress`` (a :class:`~workbench.practice.summary.Progress`), each slot takes the drill that is not yet
    passed cleanly, in the weakest topic, to redo before unseen (ties broken by ``rng``); a clean pass comes last.
    """
    st = progress.statuses if progress is not None else {}
    order = topic_order(progress) if progress is not None else {}

    def key(d: Drill) -> tuple:
        rank = _drill_rank(st.get(d.id))
        return (rank == 3, order.get(d.topic, 0), rank, rng.random())

    by_kind: dict[str, list[Drill]] = {k: sorted((d for d in pool if d.kind == k), key=key) for k in ORDER}
    for kind in ("implement", "spot_the_bug"):
        if not by_kind[kind]:
            raise ValueError(f"mock interview: no {kind} drill in the chosen topics; widen topics")
    questions = []
    for kinds in QUESTION_SLOTS:
        options = sorted((d for k in kinds for d in by_kind[k]), key=key)
        questions += options[:1]
    if len(questions) < 2:
        rest = sorted((d for k in ORDER[:3] for d in by_kind[k] if d not in questions), key=key)
        if not rest:
            raise ValueError("mock interview: the chosen topics have fewer than two concept/napkin/profile "
                             "questions")
        questions.append(rest[0])
    items = questions + [by_kind["spot_the_bug"][0], by_kind["implement"][0]]
    return sorted(items, key=lambda d: ORDER.index(d.kind))


# ----------------------------------------------------------------------------------------------- the interview


@dataclass
class _Trace:
    """What happened on one item: its attempts and how it closed."""

    attempts: int = 0
    wrong: list[str] = field(default_factory=list)
    outcome: str | None = None
    seconds: float | None = None


def _first_line(text: str, limit: int = 140) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


class MockInterview:
    """A dealt mock interview: ``show()``, ``submit(answer)``, ``give_up()``, ``finish()``; ``current`` is the item."""

    def __init__(self, items: Sequence[Drill], minutes: float, seed: int | None, progress: Any = None,
                 topics: Sequence[str] = ()) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.minutes = float(minutes)
        self.seed = seed
        self.rng = random.Random(seed)
        self.items = [d.fresh() for d in items]
        for d in self.items:
            d._mock = self
        self.topics = list(topics) or list(dict.fromkeys(d.topic for d in self.items))
        self._progress = progress
        self._seen_before = {i for i, s in (progress.statuses.items() if progress is not None else [])
                             if s.reveals}
        self.start = time.monotonic()
        self._index = 0
        self._item_start = self.start
        self._trace: dict[int, _Trace] = {}  # id(drill) -> its trace
        self._parent: dict[int, Drill] = {}  # id(follow-up) -> the implement drill it follows
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

    def trace(self, d: Drill) -> _Trace:
        return self._trace.setdefault(id(d), _Trace())

    def _closed(self, d: Drill) -> bool:
        return self.trace(d).outcome is not None

    def _unlocked(self, drill: Drill) -> bool:
        """True once ``drill``'s item is over (passed, failed or given up) or the interview is finished."""
        return self._sheet is not None or self._closed(drill)

    def _item_seconds(self, drill: Drill) -> float:
        """Seconds spent on ``drill``'s item: so far for the current one, as recorded for a closed one."""
        t = self.trace(drill)
        if t.outcome is not None:
            return t.seconds or 0.0
        return time.monotonic() - self._item_start if drill is self.current else 0.0

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
        n = len(self.items)
        label = (f"Follow-up to item {self.items.index(self._parent[id(d)]) + 1}" if id(d) in self._parent else
                 f"Item {self._index + 1} of {n}")
        return (f"**{label}** ({mmss(self.time_left)} left; hints are locked)"
                f"\n\n" + d._full_markdown().replace("d.submit(", "mock.submit("))

    def _ipython_display_(self) -> None:
        self.show()

    def __repr__(self) -> str:
        return (f"<MockInterview {self.id}: {len(self.items)} items, {self.minutes:g} min, "
                f"{mmss(self.time_left)} left, item {min(self._index + 1, len(self.items))}>")

    def submit(self, answer: Any = None, **fields: Any) -> Result:
        """Grade the current item; a pass moves on to the next one (a fail stays: try again or give up).

        ``fields`` go to the item's own ``submit`` (a profile drill's ``limiter=..., fix=...``).
        """
        d = self.current
        if d is None:
            raise RuntimeError(f"mock interview {self.id} is over: see mock.finish()")
        res = d.submit(answer, **fields) if fields else d.submit(answer)
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

    # -------------------------------------------------------------- what the drills report back
    def _after_submit(self, d: Drill, res: Result) -> None:
        t = self.trace(d)
        if t.outcome is not None:
            return  # an item already closed (a drill handle used after its turn): recorded, not scored again
        t.attempts += 1
        if not res.passed:
            t.wrong.append(_first_line(res.feedback))
            return
        if self.time_left < 0:
            outcome = "pass (over time)"
        elif d._answer_seen or d.id in self._seen_before:
            outcome = "pass (answer seen before)"
        else:
            outcome = "pass"
        self._close(d, outcome)

    def _after_give_up(self, d: Drill) -> None:
        self._close(d, "gave up")

    def _after_self_assessed(self, d: Drill, score: float) -> None:
        self.trace(d).attempts += 1
        self._close(d, f"self-assessed {100 * score:.0f}%")

    def _pose_follow_up(self, d: Drill) -> None:
        """Insert one follow-up after implement item ``d`` (chosen with the interview's seed)."""
        options = follow_ups(d)
        if not options:
            return
        fu = self.rng.choice(options).apply(d)
        fu._mock = self
        self._parent[id(fu)] = d
        self.items.insert(self.items.index(d) + 1, fu)

    def _close(self, d: Drill, outcome: str) -> None:
        t = self.trace(d)
        if t.outcome is not None:
            return
        now = time.monotonic()
        t.outcome, t.seconds = outcome, now - self._item_start
        if outcome.startswith("pass") and d.kind == "implement" and id(d) not in self._parent:
            self._pose_follow_up(d)  # the interviewer changes the problem
        if d is self.current:
            self._index += 1
            self._item_start = now
            if self._index >= len(self.items):
                self._score()

    def finish(self) -> ScoreSheet:
        """End the interview (items not reached count as such); show the score sheet once and return it.

        In Jupyter or IPython the returned sheet is not shown a second time by the same cell; in a plain Python
        prompt the prompt's echo of it is the one display.
        """
        self._score()
        self._display_sheet(returned=True)
        return self._sheet

    def _score_item(self, d: Drill) -> ItemScore:
        t = self.trace(d)
        outcome, seconds = t.outcome, t.seconds
        if outcome is None:
            outcome = "fail" if t.attempts else "not reached"
            seconds = time.monotonic() - self._item_start if (t.attempts and d is self.current) else None
        kind = "follow-up" if id(d) in self._parent else d.kind
        return ItemScore(d.id, kind, d.topic, d.level, seconds, d._hints_shown, outcome, t.attempts, list(t.wrong))

    def _next_drills(self, weak: list[str]) -> list[str]:
        """Return up to three unseen drills in ``weak`` topics, not in this interview (easiest first)."""
        if self._progress is None:
            return []
        dealt = {d.id for d in self.items}
        fresh = [s for t in weak for s in self._progress.unseen(t) if s.drill.id not in dealt
                 and s.drill.kind != "exercise"]
        return [s.drill.id for s in fresh[:3]]

    def _score(self) -> None:
        if self._sheet is None:
            rows = [self._score_item(d) for d in self.items]
            sheet = ScoreSheet(self.id, self.minutes, self.elapsed, rows, self.topics)
            sheet.next_drills = self._next_drills(sheet.weak_topics())
            self._sheet = sheet

    def _display_sheet(self, returned: bool = False) -> None:
        """Show the sheet: HTML in a notebook, text elsewhere (not when a plain prompt echoes the returned sheet)."""
        cell = _cell()
        if in_notebook():
            from IPython.display import HTML, display

            display(HTML(self._sheet._repr_html_()))
        elif cell is not None or not (returned and hasattr(sys, "ps1")):
            print(self._sheet.text())
        self._sheet._shown_in = cell


def _progress_or_none() -> Any:
    """Return the learner's progress for dealing, or None (with a warning) when the record cannot be read."""
    import warnings

    from workbench.practice import catalogue
    from workbench.practice.store import ProgressStoreError
    from workbench.practice.summary import progress

    try:
        return progress(catalogue(), exercises=False)
    except ProgressStoreError as e:
        warnings.warn(f"mock interview: dealt at random, the record cannot be read ({e})", RuntimeWarning,
                      stacklevel=3)
        return None


def mock_interview(minutes: float = 45, topics: Sequence[str] | str | None = None, seed: int | None = None,
                   drills: Sequence[str] | None = None) -> MockInterview:
    """Deal a mock interview of ``minutes``: one implement, one spot-the-bug and two questions from ``topics``.

    The deal follows the record (weakest topics and drills not yet passed first; see the module docstring);
    ``seed`` breaks its ties repeatably; ``drills`` (four ids) sets the items instead (an interviewer's pick).
    """
    from workbench.practice import catalogue

    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not 1 <= minutes <= 600:
        raise ValueError(f"mock_interview: minutes must be a number in [1, 600], got {minutes!r}")
    all_drills = catalogue()
    progress = _progress_or_none()
    if drills is not None:
        if isinstance(drills, str) or not drills:
            raise ValueError("mock_interview: drills is a list of drill ids, e.g. the four an interviewer picked")
        unknown = [i for i in drills if i not in all_drills]
        if unknown:
            raise KeyError(f"mock_interview: unknown drill id(s) {unknown}")
        items = sorted((all_drills[i] for i in drills), key=lambda d: ORDER.index(d.kind))
        wanted: list[str] = []
    else:
        wanted = [topics] if isinstance(topics, str) else list(topics or TOPICS)
        bad = [t for t in wanted if t not in TOPICS]
        if bad:
            raise ValueError(f"mock_interview: unknown topic(s) {bad}; topics are {list(TOPICS)}")
        pool = [d for d in all_drills.values() if d.topic in wanted]
        items = deal(pool, random.Random(seed), progress)
    return MockInterview(items, minutes, seed, progress, wanted)
