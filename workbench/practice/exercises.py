"""Auto-checked exercises: a statement and starter code, then ``check``, ``hint`` and ``solution``.

Each exercise lives beside its op's kernels (declared in ``kernels/<op>/exercises.toml``, like the drills) with its
reference solution file; its keys are the schema it shares with the implement drills, and its files run through
the loader they share (:mod:`workbench.practice.learner_code`). The starter the learner completes is generated
from the solution's learner regions (:mod:`workbench.practice.starters`), so the two cannot drift apart. Both
define one function with the op's signature (``entry``), so the checker can call either.

An exercise whose point is speed carries ``budgets`` (``{metric: "<= 4  # why"}``, see :mod:`workbench.budgets`)
and the ``budget_shape`` they are measured at: its starter may be correct but slow, and ``check`` then answers
"Correct, but 32 sectors per store request where 4 are possible: ..." instead of a pass.

Every ``check`` is recorded in the progress store (:mod:`workbench.practice.store`) like a drill's attempt, as
kind ``exercise`` under ``exercise:<id>`` in the topic of its op: pass or fail, the seconds since the exercise was
opened, the hints shown; ``solution()`` is recorded as a reveal, and a later pass counts as made after it.
``wb.progress()`` shows them beside the drills.
"""

from __future__ import annotations

import html
import inspect as _inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import budgets as _budgets
from workbench.budgets import Budget
from workbench.checker import CaseResult, CheckReport, check
from workbench.practice import starters
from workbench.practice.learner_code import load_entry, parse_spec
from workbench.registry import get_op

_EXERCISES: dict[str, Exercise] = {}
_LOADED: list[bool] = []  # the exercises.toml files are read once per process


@dataclass(eq=False)
class Exercise:
    """One drill: read ``statement``, complete ``starter``, then ``check(fn)``; ``hint()`` and ``solution()`` help."""

    id: str
    title: str
    op: str
    statement: str  # markdown
    solution_file: Path  # the solution, with the learner regions the starter is generated from
    entry: str  # the function both files define, called like the op
    hints: list[str]
    check_kw: dict[str, Any] = field(default_factory=dict)  # shapes/dtypes/seeds for the checker
    backend: str | None = None  # "cuda" or "triton": the check refuses work not done by that backend's launches
    source: Path | None = None  # the exercises.toml that declares it
    # "module:function" checking an exercise whose function is not an op's kernel (the bus factor of a collective):
    # called as checker(fn, **check_kw) -> CheckReport instead of wb.check(fn, op, ...)
    checker: str | None = None
    _hints_shown: int = 0
    _opened: float = field(default_factory=time.monotonic, repr=False)  # when exercise(id) last handed it out
    _solution_seen: bool = field(default=False, repr=False)  # solution() shown since then

    # ---------------------------------------------------------------- reading
    @property
    def starter(self) -> str:
        """Return the starter code to copy into a cell and complete."""
        return starters.starter_text(self.solution_file)

    @property
    def starter_file(self) -> Path:
        """Return a file holding the starter (generated from the solution), for ``learner_code.load_entry``."""
        return starters.starter_file(self.solution_file)

    def solution(self) -> str:
        """Return the reference solution's source (shown in full in a notebook)."""
        src = starters.solution_text(self.solution_file)
        if not self._solution_seen:
            self._solution_seen = True
            self._record("reveal", answer="solution shown")
        _display_code(src, f"Solution: {self.title}")
        return src

    @property
    def topic(self) -> str:
        """Return the practice topic of the exercise's op (as ``wb.progress()`` groups it)."""
        from workbench.practice.summary import op_topic

        return op_topic(self.op)

    def _record(self, event: str, **kw: Any) -> None:
        """Write one progress event of this exercise (kind ``exercise``, id ``exercise:<id>``)."""
        from types import SimpleNamespace

        from workbench.practice import store

        who = SimpleNamespace(id=f"exercise:{self.id}", kind="exercise", topic=self.topic, level="exercise",
                              _hints_shown=self._hints_shown)
        store.record(who, event, **kw)

    def hint(self) -> str:
        """Reveal the next hint (one at a time); after the last, say so."""
        if self._hints_shown >= len(self.hints):
            msg = f"No more hints ({len(self.hints)} shown). ex.solution() shows the reference solution."
        else:
            self._hints_shown += 1
            msg = f"Hint {self._hints_shown}/{len(self.hints)}: {self.hints[self._hints_shown - 1]}"
        print(msg)
        return msg

    def _repr_markdown_(self) -> str:
        rule = f"{self.rule()}\n\n" if self.backend else ""
        return (f"### Exercise `{self.id}`: {self.title}\n\n{self.statement}\n\n{rule}"
                f"Your function: `{self.entry}{self._signature()}` (called like `{get_op(self.op).signature}`).\n\n"
                f"{self._budgets_markdown()}Starter code:\n\n```python\n{self.starter}```\n\n"
                f"Then: `ex.check({self.entry})`; stuck: `ex.hint()`; done: `ex.solution()`.")

    @property
    def budgets(self) -> list[Budget]:
        """Return the performance budgets a correct solution must also meet (empty: correctness only)."""
        return _budgets.parse(self.check_kw.get("budgets") or {}, f"exercise {self.id}")

    def _budgets_markdown(self) -> str:
        if not self.budgets:
            return ""
        shape = self.check_kw.get("budget_shape") or _budgets.default_shape(self.op)
        at = ", ".join(f"{k}={v}" for k, v in shape.items())
        items = "".join(f"- {b}" + (f" ({b.why})" if b.why else "") + "\n" for b in self.budgets)
        return (f"Performance budgets (counted by `wb.profile` at {at}; a correct but slower kernel does not "
                f"pass):\n\n{items}\n")

    def __repr__(self) -> str:
        return f"<Exercise {self.id}: {self.title} (op {self.op}; {len(self.hints)} hints)>"

    def _signature(self) -> str:
        fn = load_entry(self.solution_file, self.entry)
        return str(_inspect.signature(fn))

    # ---------------------------------------------------------------- checking
    def check(self, fn: Callable) -> CheckReport:
        """Check ``fn`` with friendly, graded feedback; returns the checker's report (truthy when correct)."""
        if not callable(fn):
            raise TypeError(f"exercise {self.id}: check() takes your function {self.entry}, got {type(fn).__name__}")
        if self.checker is not None:
            self._check_signature(fn)
            report = _resolve(self.checker)(fn, **self.check_kw)
        elif self.backend is None:
            report = check(fn, self.op, **self.check_kw)  # a wrong signature raises a TypeError naming the expected one
        else:
            report = self._check_backend(fn)
        text = self.feedback(report)
        self._record("attempt", passed=bool(report.ok), seconds=time.monotonic() - self._opened,
                     answer=f"{getattr(fn, '__name__', 'fn')}: {text.splitlines()[0][:200]}",
                     revealed_before=self._solution_seen)
        print(text)
        return report

    def _check_signature(self, fn: Callable) -> None:
        """Raise TypeError when ``fn`` cannot be called like the solution's entry (an exercise with its own checker)."""
        try:
            got = _inspect.signature(fn)
        except (TypeError, ValueError):
            return
        want = _inspect.signature(load_entry(self.solution_file, self.entry))
        kinds = (_inspect.Parameter.POSITIONAL_ONLY, _inspect.Parameter.POSITIONAL_OR_KEYWORD)
        required = [p for p in got.parameters.values() if p.kind in kinds and p.default is p.empty]
        positional = [p for p in got.parameters.values() if p.kind in kinds]
        n = len([p for p in want.parameters.values() if p.kind in kinds and p.default is p.empty])
        has_var = any(p.kind == p.VAR_POSITIONAL for p in got.parameters.values())
        if len(required) > n or (len(positional) < n and not has_var):
            raise TypeError(f"exercise {self.id}: your function has signature {getattr(fn, '__name__', 'fn')}{got}, "
                            f"but it is called as {self.entry}{want}")

    def _check_backend(self, fn: Callable) -> CheckReport:
        """Check ``fn`` under the implement drills' rule: the exercise's backend launches do the work."""
        from workbench.practice.implement import BackendGuard, count_launches

        guarded = BackendGuard(fn, self.backend)
        with count_launches(self.backend, guarded.seen) as launches:
            report = check(guarded, self.op, **self.check_kw)
        if launches[0] == 0 and report.runs and not any(c.diagnosis == "error" for c in report.runs):
            for c in report.runs:  # right answers without a launch: the exercise is about writing the kernel
                if c.ok or c.diagnosis == "outside_backend":
                    c.ok, c.diagnosis = False, "outside_backend"
                    c.detail = f"no {self.backend} kernel was launched: the exercise's kernel must do the work"
        return report

    def rule(self) -> str:
        """Return the rule on who does the work ('' for an exercise without a backend)."""
        if self.backend is None:
            return ""
        from workbench.practice.implement import BACKEND_NAMES

        return (f"**The rule:** the {BACKEND_NAMES[self.backend]} kernels do the work: while your function runs, "
                "torch may allocate and take views of the inputs, nothing else, and every output must be a buffer "
                "you allocate and hand to a launch.")

    def feedback(self, report: CheckReport) -> str:
        """Turn a check report into graded advice: the diagnosis, the failure it comes from, the runs by shape."""
        n, bad = len(report.runs), sum(not c.ok for c in report.runs)
        runs = (f"all {n} runs match the float64 reference (sizes "
                f"{sorted({tuple(c.shape.values()) for c in report.cases})}, dtypes "
                f"{sorted({c.dtype for c in report.cases})})")
        if report.ok:
            within = ""
            if report.budgets is not None:
                met = [str(r.budget) for r in report.budgets.results if r.measured]
                within = (f", within budget ({'; '.join(met)}; wb.profile at {report.budgets.where})" if met else "")
                within += "".join(f"\n  {ln}" for ln in report.budgets.lines() if not ln.startswith("met: "))
            return f"Correct: {runs}{within}. Compare with ex.solution()."
        if report.correct:  # over budget: correct but slow
            missed = report.budgets.missed
            more = "".join(f"\n  Also: {r.message}" for r in missed[1:])
            return (f"Correct, but {missed[0].message}{more}\n  {runs[0].upper() + runs[1:]}; the budgets are "
                    f"counted by wb.profile at {report.budgets.where}: see every counter with "
                    f"wb.profile({self.entry}, *wb.make_inputs({self.op!r}, {_kwargs(report.budgets.shape)}))"
                    ".report().\nStuck? ex.hint()")
        d = report.diagnosis
        wrong_all = all(c.n_mismatch == c.n_elements for c in report.failures)
        if d in ("unwritten", "unwritten_rows") and wrong_all and bad == n:
            return ("Not yet: your kernel wrote none of the outputs (every element is still the checker's poison, "
                    "NaN). Fill in the TODOs so each thread/program stores its result. Stuck? ex.hint()")
        from workbench.practice.implement import failure_headline

        level = "Almost" if bad < n else "Not yet"
        lines = [f"{level}: {failure_headline(report).text()}"]
        outs, right = _wrong_outputs(report)
        if outs:
            lines.append(f"  Wrong output{'s' if len(outs) > 1 else ''}: {', '.join(outs)}"
                         + (f" ({', '.join(right)} right)" if right else ""))
        lines.append("  Runs by shape:\n" + "\n".join(f"    {row}" for row in _by_shape(report)))
        lines.append("Stuck? ex.hint()")
        return "\n".join(lines)


def _resolve(path: str) -> Callable:
    """Return the function a 'module:function' path names."""
    import importlib

    mod, _, name = path.partition(":")
    return getattr(importlib.import_module(mod), name)


def _kwargs(shape: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in shape.items())


def _wrong_outputs(report: CheckReport) -> tuple[list[str], list[str]]:
    """Return (the outputs some run got wrong, the ones every compared run got right) of a multi-output op."""
    outs = get_op(report.op).outputs
    if len(outs) < 2:
        return [], []
    wrong = {o for c in report.failures for o in c.wrong_outputs}
    return [o for o in outs if o in wrong], [o for o in outs if o not in wrong] if wrong else []


def _by_shape(report: CheckReport) -> list[str]:
    """Return one line per checked shape: how many runs passed, and the failed ones with their diagnosis."""
    rows: dict[tuple, list[CaseResult]] = {}
    for c in report.cases:
        rows.setdefault(tuple(c.shape.items()), []).append(c)
    out = []
    for key, cases in rows.items():
        shape = ", ".join(f"{k}={v}" for k, v in key)
        ok = sum(c.ok for c in cases)
        fails = list(dict.fromkeys(f"{c.dtype}{'' if c.case == 'random' else f'/{c.case}'}: {c.diagnosis}"
                                   for c in cases if not c.ok))  # each kind of failure once
        verdict = "pass" if not fails else "FAIL"
        out.append(f"{verdict}  {shape}: {ok} of {len(cases)} runs pass"
                   + (f"; failed {'; '.join(fails)}" if fails else ""))
    return out


def _display_code(src: str, title: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None:
            display(HTML(f"<b>{html.escape(title)}</b>"))
            display({"text/markdown": f"```python\n{src}\n```"}, raw=True)
    except ImportError:
        pass


EXERCISE_KEYS = {"id": str, "title": str, "op": str, "solution": str, "entry": str}  # beside the shared schema


def register_exercise(id: str, *, here: str, starter: str | None = None, **table: Any) -> Exercise:  # noqa: A002
    """Register an exercise from its table's keys (see :mod:`workbench.practice.learner_code`); pass ``__file__``.

    The solution file sits beside ``here``; the starter is generated from its learner regions, so ``starter=`` (a
    starter file) is refused.
    """
    if starter is not None:
        raise TypeError(f"exercise {id}: starter files are generated from the solution's learner regions "
                        "(workbench.practice.starters); mark them in the solution file and drop starter=")
    table = {"id": id, **table}
    checker = table.pop("checker", None)
    if checker is not None and (not isinstance(checker, str) or ":" not in checker):
        raise TypeError(f"exercise {id}: checker must be 'module:function', got {checker!r}")
    spec = parse_spec(f"{here}: exercise {id!r}", table, EXERCISE_KEYS, (*EXERCISE_KEYS, "statement", "hints"))
    ex = Exercise(id=id, title=table["title"], op=table["op"], statement=spec.statement,
                  solution_file=Path(here).parent / table["solution"], entry=table["entry"], hints=list(spec.hints),
                  check_kw=dict(spec.check), backend=spec.backend, checker=checker)
    _EXERCISES[id] = ex
    return ex


def load_file(path: Path) -> list[Exercise]:
    """Register the exercises of one ``exercises.toml`` (``[[exercise]]`` tables, solution files beside it)."""
    from workbench.practice.loading import tomllib

    if tomllib is None:
        raise RuntimeError("reading exercises needs Python >= 3.11 (tomllib) or the tomli package")
    try:
        tables = tomllib.loads(path.read_text())["exercise"]
    except (KeyError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: not a list of [[exercise]] tables ({e})") from e
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{path}: not a list of [[exercise]] tables (write [[exercise]], not [exercise])")
    out = []
    for i, t in enumerate(tables):
        if "id" not in t:
            raise ValueError(f"{path}: exercise #{i + 1}: missing key 'id'")
        try:
            out.append(register_exercise(here=str(path), **t))
        except TypeError as e:  # a key register_exercise takes from Python only (starter=, here=)
            raise ValueError(f"{path}: exercise {t['id']!r}: {e}") from e
        out[-1].source = path
    return out


def _load_all() -> None:
    import kernels

    if _LOADED:
        return
    for root in kernels.__path__:
        for path in sorted(Path(root).glob("*/exercises.toml")):
            load_file(path)
    _LOADED.append(True)


def exercises() -> list[str]:
    """Return the ids of all exercises."""
    _load_all()
    return sorted(_EXERCISES)


def exercise(id: str) -> Exercise:  # noqa: A002
    """Return exercise ``id`` (in a notebook, its statement and starter code display)."""
    _load_all()
    if id not in _EXERCISES:
        raise KeyError(f"unknown exercise {id!r}: known exercises are {sorted(_EXERCISES)}")
    ex = _EXERCISES[id]
    ex._hints_shown = 0
    ex._opened = time.monotonic()
    ex._solution_seen = False
    return ex
