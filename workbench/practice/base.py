"""What every drill shares: identity, statement, hints, the clock of a timed attempt, and the record of attempts.

A kind (``implement``, ``spot_the_bug``, ``napkin``, ``concept``) subclasses :class:`Drill` and supplies three
things: ``statement()`` (markdown), ``_grade(answer)`` (a :class:`Grade`) and ``model_answer()`` (an object of
the kind a submission takes). ``submit``, ``reveal``, ``hint``, ``start`` and ``give_up`` are here, the same for
every kind, and every one of them is written to the progress store (:mod:`workbench.practice.store`).

Honest records: a learner's call of ``model_answer()`` (any kind's: the method is wrapped when a kind defines it)
is recorded as a reveal, like ``reveal()``, and a later pass counts as made after a reveal; a pass over time is
recorded as such. ``_self_assessed(score, note)`` records a learner's own mark of a free-text answer against a
rubric: an event of its own, never a pass.
"""

from __future__ import annotations

import copy
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("implement", "spot_the_bug", "napkin", "concept", "profile")
LEVELS = ("easy", "medium", "hard")
TOPICS = ("gemm", "softmax", "attention", "moe", "memory", "tensor-cores", "numerics", "communication")
TOPIC_NOTES = {
    "gemm": "tiling, data reuse, split-K, Triton and CUDA C GEMMs",
    "softmax": "row reductions: softmax, online softmax, RMSNorm",
    "attention": "FlashAttention forward and backward",
    "moe": "routing, alignment, fused experts, expert parallelism",
    "memory": "bandwidth, coalescing, shared memory, occupancy, tails and grids",
    "tensor-cores": "mma.sync, wgmma, TMA, fp8",
    "numerics": "precision, overflow, special values, determinism",
    "communication": "collectives, busbw, ring attention, tensor and data parallelism, overlap",
}


class DrillDataError(ValueError):
    """A drills.toml file (or a drill built from it) breaks the drill schema; the message names file and drill."""


@dataclass
class Grade:
    """What a kind's grader returns: pass or fail, the feedback to show, and anything worth keeping."""

    passed: bool
    feedback: str
    summary: str = ""  # a short line for the progress store ("lines [7], diagnosis masking")
    details: dict = field(default_factory=dict)


@dataclass
class Result:
    """The outcome of ``drill.submit(answer)``: truthy when it passed; ``feedback`` says why."""

    drill: str
    kind: str
    passed: bool
    feedback: str
    seconds: float | None = None  # time taken: since start() in a timed attempt, else since the drill was opened
    over_time: bool = False
    details: dict = field(default_factory=dict)
    follow_up: str = ""  # markdown shown after the feedback (a mock interview's next item or its score sheet)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        from workbench.practice.render import markdown_to_text

        head = "PASS" if self.passed else "FAIL"
        when = ""
        if self.seconds is not None:
            when = f" ({_mmss(self.seconds)}{', over time' if self.over_time else ''})"
        more = f"\n\n{markdown_to_text(self.follow_up)}" if self.follow_up else ""
        return f"{head} {self.drill}{when}\n{self.feedback}{more}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        when = ""
        if self.seconds is not None:
            when = f" &nbsp; {_mmss(self.seconds)}{' (over time)' if self.over_time else ''}"
        more = f"\n\n---\n\n{self.follow_up}" if self.follow_up else ""
        return (f"<b style='color:{colour}'>{'PASS' if self.passed else 'FAIL'}</b> `{self.drill}`{when}\n\n"
                f"{self.feedback}{more}")


def _mmss(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 60}:{s % 60:02d}"


@dataclass
class Clock:
    """The clock of one timed attempt: started at ``start`` (monotonic seconds), ``minutes`` long."""

    minutes: float
    start: float = field(default_factory=time.monotonic)
    stopped: float | None = None
    given_up: bool = False

    @property
    def elapsed(self) -> float:
        return (self.stopped if self.stopped is not None else time.monotonic()) - self.start

    @property
    def left(self) -> float:
        return self.minutes * 60 - self.elapsed

    @property
    def running(self) -> bool:
        return self.stopped is None

    def stop(self) -> None:
        if self.stopped is None:
            self.stopped = time.monotonic()


def _recorded_model_answer(fn: Callable) -> Callable:
    """Wrap a kind's ``model_answer`` so a call from outside the workbench records a reveal (once per handle)."""

    @functools.wraps(fn)
    def model_answer(self: Drill) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not caller.startswith("workbench."):  # reveal(), explanation() and the mock call it too: not a reveal
            self._note_model_answer()
        return fn(self)

    model_answer._records_reveal = True  # type: ignore[attr-defined]
    return model_answer


@dataclass(eq=False)
class Drill:
    """One interview drill. ``show()`` the statement, ``submit(answer)``, stuck: ``hint()``, done: ``reveal()``.

    ``start(minutes)`` makes the attempt timed: hints are locked until ``give_up()``, and the result says the time
    taken. ``wb.drill(id)`` returns a fresh handle each time (hints and clock start over; the record persists).
    """

    id: str
    kind: str
    level: str
    topic: str
    title: str
    op: str
    chapter: str
    hints: list[str]
    source: str  # the drills.toml it came from
    _opened: float = field(default_factory=time.monotonic, repr=False)
    _hints_shown: int = field(default=0, repr=False)
    _clock: Clock | None = field(default=None, repr=False)
    _answer_seen: bool = field(default=False, repr=False)
    _mock: Any = field(default=None, repr=False)  # the MockInterview that dealt this handle, if any
    _attempts: int = field(default=0, repr=False)
    _passed: bool = field(default=False, repr=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("model_answer")
        if callable(fn) and not getattr(fn, "_records_reveal", False):
            cls.model_answer = _recorded_model_answer(fn)  # type: ignore[method-assign]

    # -------------------------------------------------------------- what a kind provides
    def statement(self) -> str:
        """Return the drill's statement as markdown."""
        raise NotImplementedError

    def _grade(self, answer: Any) -> Grade:
        raise NotImplementedError

    def model_answer(self) -> Any:
        """Return the model answer, as the same kind of object a submission takes (recorded as a reveal)."""
        raise NotImplementedError

    def explanation(self) -> str:
        """Return the markdown shown with the model answer."""
        raise NotImplementedError

    def answer_format(self) -> str:
        """Return one line saying what ``submit`` takes."""
        raise NotImplementedError

    # -------------------------------------------------------------- handles
    def fresh(self) -> Drill:
        """Return a new handle on this drill: no hints shown, no clock, opened now."""
        d = copy.copy(self)
        d._opened = time.monotonic()
        d._hints_shown = 0
        d._clock = None
        d._answer_seen = False
        d._mock = None
        d._attempts = 0
        d._passed = False
        return d

    # -------------------------------------------------------------- reading
    def header(self) -> str:
        """Return the one-line markdown header: id, kind, level, topic."""
        return f"### `{self.id}` · {self.title}\n*{self.kind.replace('_', '-')} · {self.level} · {self.topic}*"

    def _repr_markdown_(self) -> str:
        return self._full_markdown()

    def _full_markdown(self) -> str:
        parts = [self.header(), self.statement(), f"**Answer with** {self.answer_format()}"]
        if self._clock is not None and self._clock.running:
            parts.append(f"*Timed: {_mmss(max(0.0, self._clock.left))} left of {self._clock.minutes:g} min; hints "
                         "are locked until you give up (`d.give_up()`).*")
        return "\n\n".join(parts)

    def show(self) -> None:
        """Display the statement (rendered markdown in a notebook, plain text in a terminal)."""
        from workbench.practice.render import display_markdown

        display_markdown(self._full_markdown())

    def __repr__(self) -> str:
        return f"<Drill {self.id}: {self.kind} · {self.level} · {self.topic}: {self.title}>"

    # -------------------------------------------------------------- timing
    def start(self, minutes: float = 20) -> Drill:
        """Start a timed attempt of ``minutes``: the clock runs until a pass or ``give_up()``; hints are locked."""
        if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not 0 < minutes <= 600:
            raise ValueError(f"drill {self.id}: start(minutes) takes a number of minutes in (0, 600], got {minutes!r}")
        self._clock = Clock(float(minutes))
        return self

    @property
    def timed(self) -> bool:
        """True while a timed attempt is running (started, not passed, not given up)."""
        return self._clock is not None and self._clock.running

    @property
    def time_left(self) -> float | None:
        """Seconds left in the timed attempt (negative once over time), or None when not timed."""
        return None if self._clock is None else self._clock.left

    def _hints_locked(self) -> bool:
        if self._mock is not None and not self._mock._unlocked(self):
            return True
        return self._clock is not None and self._clock.running and not self._clock.given_up

    # -------------------------------------------------------------- doing
    def hint(self) -> str:
        """Return (and print) the next hint; locked during a timed attempt or a mock interview until you give up."""
        if self._hints_locked():
            msg = (f"Hints are locked while the clock runs ({'mock interview' if self._mock else 'timed drill'}). "
                   f"{'mock.give_up()' if self._mock else 'd.give_up()'} ends this attempt as a fail and unlocks them.")
        elif not self.hints:
            msg = f"{self.id} has no hints."
        elif self._hints_shown >= len(self.hints):
            msg = f"No more hints ({len(self.hints)} shown). d.reveal() shows the model answer (recorded as a reveal)."
        else:
            self._hints_shown += 1
            msg = f"Hint {self._hints_shown}/{len(self.hints)}: {self.hints[self._hints_shown - 1]}"
        print(msg)
        return msg

    def submit(self, answer: Any) -> Result:
        """Grade ``answer`` and record the attempt; returns a :class:`Result` (``.passed``, ``.feedback``)."""
        from workbench.practice import store

        revealed_before = self._answer_seen
        try:
            grade = self._grade(answer)
        except BaseException as e:  # SystemExit from the answer's code is a failed attempt, not the end of Python
            if isinstance(e, (Exception, KeyboardInterrupt)):
                raise
            grade = Grade(False, f"Not yet: your answer raised {type(e).__name__}({', '.join(map(repr, e.args))}), "
                                 "which ends a program; a drill answer returns (or raises an Exception).",
                          f"raised {type(e).__name__}")
        seconds, over = self._time_taken()
        if grade.passed and self._clock is not None:
            self._clock.stop()
        self._attempts += 1
        self._passed = self._passed or grade.passed
        res = Result(self.id, self.kind, grade.passed, grade.feedback, seconds, over, grade.details)
        store.record(self, "attempt", passed=grade.passed, seconds=seconds, over_time=over,
                     answer=grade.summary, revealed_before=revealed_before)
        if self.kind == "concept" and not grade.passed:
            self._answer_seen = True  # a concept's model answer is shown after an attempt
            store.record(self, "reveal", answer="shown after a failed attempt")
        if self._mock is not None:
            self._mock._after_submit(self, res)
        return res

    def _time_taken(self) -> tuple[float, bool]:
        if self._mock is not None:
            return self._mock._item_seconds(self), self._mock.time_left < 0
        if self._clock is not None:
            return self._clock.elapsed, self._clock.elapsed > self._clock.minutes * 60
        return time.monotonic() - self._opened, False

    def give_up(self) -> str:
        """End this attempt as a fail (recorded); unlocks the hints of a timed drill or a mock interview item."""
        from workbench.practice import store

        seconds, over = self._time_taken()
        if self._clock is not None:
            self._clock.given_up = True
            self._clock.stop()
        store.record(self, "give_up", passed=False, seconds=seconds, over_time=over)
        if self._mock is not None:
            self._mock._after_give_up(self)
        where = f"mock.items[{self._mock.items.index(self)}]" if self._mock is not None else "d"
        msg = (f"Gave up on {self.id} after {_mmss(seconds)}: hints unlocked ({where}.hint()); {where}.reveal() "
               "shows the answer.")
        print(msg)
        return msg

    def reveal(self) -> Any:
        """Return the model answer (the kind of object ``submit`` takes), show its explanation, record the reveal.

        In a timed attempt or a mock interview, revealing first gives up the attempt.
        """
        from workbench.practice import store
        from workbench.practice.render import display_markdown

        if self._clock is not None and self._clock.running:
            self.give_up()
        elif self._mock is not None and not self._mock._unlocked(self):
            self.give_up()
        self._answer_seen = True
        store.record(self, "reveal", answer="model answer revealed")
        display_markdown(f"**Model answer for `{self.id}`**\n\n{self.explanation()}")
        return self.model_answer()

    def _note_model_answer(self) -> None:
        """Record a learner's ``model_answer()`` call as a reveal (once per handle; a running attempt is given up)."""
        from workbench.practice import store

        if self._answer_seen:
            return
        if (self._clock is not None and self._clock.running) or (self._mock is not None
                                                                  and not self._mock._unlocked(self)):
            self.give_up()
        self._answer_seen = True
        store.record(self, "reveal", answer="model_answer() called")

    def _self_assessed(self, score: float, note: str = "") -> None:
        """Record the learner's own mark of a free-text answer: ``score`` is the share of the rubric met (0..1).

        It is an event of its own (``self_assessed``), never a pass: ``wb.progress()`` shows it beside the
        passes, and the mock interview's sheet as "self-assessed". ``note`` (up to 500 characters) says what was
        marked, e.g. "rubric 3/4: names the rescale, the running max, the final divide; misses the -inf row".
        """
        from workbench.practice import store

        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise ValueError(f"drill {self.id}: a self-assessment's score is the share of the rubric met, a number "
                             f"in [0, 1], got {score!r}")
        seconds, over = self._time_taken()
        self._attempts += 1
        store.record(self, "self_assessed", seconds=seconds, over_time=over, answer=note, score=float(score),
                     revealed_before=self._answer_seen)
        if self._mock is not None:
            self._mock._after_self_assessed(self, float(score))
