"""Concept drills, in forms a program grades honestly; free text is only ever self-graded.

Six forms (``form`` in the drill's data):

* ``choice``: one right option among 3 to 6; ``d.submit("b")``.
* ``select``: true/false statements, each judged; submit the set of true ones: ``d.submit("ac")``,
  ``d.submit({"a", "c"})``, ``d.submit("none")``. It passes when every statement is judged right; the feedback
  judges each one.
* ``code``: the idea written as a small function, ``d.submit(f)`` (a function or lambda; or a string holding an
  expression in the parameters). It is called on fixed edge cases, then on random inputs seeded by the drill's
  id, and compared with a reference in :mod:`workbench.practice.concept_refs`; a difference shows the input.
* ``order``: steps to put in order; submit the letters in order, ``d.submit("cabd")``. Steps the data groups
  together may come in either order.
* ``blank``: fill the blank(s) ``___`` of a formula or a PTX/SASS mnemonic; ``d.submit("ldmatrix")`` (a list
  for several blanks). Case, spaces, backticks and a final period do not matter; ``**`` and ``^`` are one, as
  are ``×``/``·`` and ``*``; the data lists the other accepted spellings.
* ``explain``: a few sentences, never graded by a program: ``d.submit("...")`` shows the model answer beside a
  rubric, and ``d.self_assess("ac")`` marks the rubric points your answer made. It is recorded as a
  self-assessment, never as a pass.

The options of ``choice``, ``select`` and ``order`` are shuffled per attempt by a seeded generator: the statement
shows the letters the grader uses (and the seed; ``d.reshuffle(seed)`` repeats an order). After a graded
attempt that fails, the model answer and its explanation are shown (the drill counts it as a reveal), and the
next attempt gets a new order.
"""

from __future__ import annotations

import builtins
import inspect
import itertools
import math
import random
import re
import secrets
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.practice.base import Drill, Grade, Result

FORMS = ("choice", "select", "code", "order", "blank", "explain")
SHUFFLED = ("choice", "select", "order")
LETTERS = string.ascii_lowercase
DEFAULT_TRIALS = 200


@dataclass(frozen=True)
class Statement:
    """One statement of a multiple-select drill: its text, whether it is true, and why."""

    text: str
    true: bool
    why: str = ""


def normalise(text: str) -> str:
    """Return ``text`` as blanks compare it: lower case, no spaces or backticks, one spelling of powers and products."""
    t = text.strip().strip("`'\"").rstrip(".;").lower()
    t = t.replace("**", "^").replace("×", "*").replace("·", "*").replace("−", "-")
    return re.sub(r"[\s`]+", "", t)


def _fmt(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return np.array2string(v, precision=5, separator=", ", suppress_small=True)
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_fmt(x) for x in v)
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    return repr(v)


def _same(got: Any, want: Any, rtol: float, atol: float) -> bool:
    """Return True when ``got`` equals ``want`` (element-wise, within the tolerances; tuples compared item by item)."""
    if isinstance(want, tuple):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(_same(g, w, rtol, atol) for g, w in zip(got, want, strict=True)))
    try:
        g = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return False
    w = np.asarray(want, dtype=float)
    if g.shape != w.shape:
        return False
    if rtol == 0 and atol == 0:
        return bool(np.array_equal(g, w))
    return bool(np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True))


class SelfGraded(Result):
    """The result of an ``explain`` drill: never a pass; its feedback is the model answer and the rubric."""

    def __str__(self) -> str:
        from workbench.practice.render import markdown_to_text

        return f"SELF-GRADE {self.drill}\n{markdown_to_text(self.feedback)}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return f"<b style='color:#9a6700'>SELF-GRADE</b> `{self.drill}`\n\n{self.feedback}"


_SAFE_BUILTINS = {n: getattr(builtins, n) for n in ("abs", "max", "min", "sum", "len", "range", "round", "int",
                                                    "float", "sorted", "divmod", "pow", "set", "list", "tuple", "zip",
                                                    "enumerate", "any", "all")}
_MATH = {n: getattr(math, n) for n in dir(math) if not n.startswith("_")}


@dataclass(eq=False, repr=False)
class ConceptDrill(Drill):
    """A concept question in one of :data:`FORMS`; ``answer_format()`` says what ``submit`` takes."""

    form: str = "choice"
    question: str = ""
    choices: tuple[str, ...] = ()  # choice: the options as stored, the right one at `answer`
    answer: str = ""  # choice: the right option's letter in the stored order
    statements: tuple[Statement, ...] = ()  # select
    steps: tuple[tuple[str, ...], ...] = ()  # order: groups of steps, in order; steps of a group in any order
    blanks: tuple[tuple[str, ...], ...] = ()  # blank: accepted spellings per blank (the first is the model)
    ref: str = ""  # code: the name of a reference in concept_refs.REFS
    trials: int = DEFAULT_TRIALS  # code: random inputs after the fixed ones
    rubric: tuple[str, ...] = ()  # explain
    model_text: str = ""  # explain: the model answer
    why: str = ""  # markdown shown with the model answer
    references: tuple[str, ...] = field(default_factory=tuple)
    seed: int = 0  # the shuffle's seed (a fresh handle draws one)
    _written: str | None = field(default=None, repr=False)  # explain: the answer written before self-assessing

    # -------------------------------------------------------------- handles and the shuffle
    def fresh(self) -> ConceptDrill:
        """Return a new handle (see :meth:`Drill.fresh`) with a new shuffle seed."""
        d = super().fresh()
        d.seed = secrets.randbelow(10_000)
        d._written = None
        return d

    def reshuffle(self, seed: int | None = None) -> ConceptDrill:
        """Set the shuffle's seed (a new random one when None) and return the drill; ``show()`` shows the order."""
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"drill {self.id}: reshuffle(seed) takes an int >= 0 or None, got {seed!r}")
        self.seed = secrets.randbelow(10_000) if seed is None else seed
        return self

    @property
    def self_graded(self) -> bool:
        """True for a free-text drill: it is marked by the learner, never passed by the program."""
        return self.form == "explain"

    @property
    def multiple_choice(self) -> bool:
        return self.form == "choice"

    def _items(self) -> list[str]:
        if self.form == "choice":
            return list(self.choices)
        if self.form == "select":
            return [s.text for s in self.statements]
        return [s for group in self.steps for s in group]

    def order(self, attempt: int | None = None) -> list[int]:
        """Return the stored indices of the items in the order shown at ``attempt`` (default: the current one)."""
        items = self._items()
        perm = list(range(len(items)))
        if self.form in SHUFFLED:
            k = self._attempts if attempt is None else attempt
            random.Random(f"{self.id}|{self.seed}|{k}").shuffle(perm)
        return perm

    def letter_of(self, text: str) -> str:
        """Return the letter the current order gives to the item that starts with ``text``."""
        items = self._items()
        hits = [i for i, p in enumerate(self.order()) if items[p].startswith(text)]
        if len(hits) != 1:
            raise ValueError(f"drill {self.id}: {len(hits)} items start with {text!r}; give more of the text")
        return LETTERS[hits[0]]

    # -------------------------------------------------------------- reading
    def _listed(self) -> str:
        items = self._items()
        return "\n".join(f"- **({LETTERS[i]})** {items[p]}" for i, p in enumerate(self.order()))

    def _question(self) -> str:
        if self.form == "code":
            from workbench.practice.concept_refs import get

            r = get(self.ref)
            return self.question.format(**r.given()) if r.given else self.question
        return self.question

    def statement(self) -> str:
        q = self._question()
        if self.form == "code":
            from workbench.practice.concept_refs import get

            r = get(self.ref)
            return f"{q}\n\nWrite `{r.signature}`, returning {r.returns}."
        if self.form not in SHUFFLED:
            return q
        lead = {"select": "Which of these are true?" if "true" not in q.lower() else "",
                "order": "Put these steps in order." if "order" not in q.lower() else ""}.get(self.form, "")
        note = (f"*Shown in a shuffled order (attempt {self._attempts + 1}, seed {self.seed}): the letters above are "
                "the ones graded; `d.reshuffle(seed)` repeats an order.*")
        return "\n\n".join(p for p in (q, lead, self._listed(), note) if p)

    def answer_format(self) -> str:
        n = len(self._items())
        last = LETTERS[n - 1] if n else "a"
        return {
            "choice": f"one letter: `d.submit(\"a\")` ... `d.submit(\"{last}\")`.",
            "select": "the letters of every true statement: `d.submit(\"ac\")` or `d.submit({\"a\", \"c\"})`; "
                      "`d.submit(\"none\")` when none is true.",
            "order": f"the {n} letters in the order the steps happen, as one string: `d.submit(\"...\")` (or a list).",
            "blank": ("the missing text: `d.submit(\"...\")`" if len(self.blanks) == 1 else
                      f"a list of {len(self.blanks)} strings, one per blank: `d.submit([...])`") +
                     "; case and spaces do not matter.",
            "code": "a function or a lambda, `d.submit(f)` (or an expression in its parameters, as a string); it "
                    f"is checked on {self.trials} seeded random inputs and some edge cases.",
            "explain": "a few sentences, `d.submit(\"...\")`: the model answer and a rubric follow, and "
                       "`d.self_assess(\"ab\")` records the rubric points you made (self-graded: never a pass).",
        }[self.form]

    # -------------------------------------------------------------- model answers
    def model_answer(self) -> Any:
        perm = self.order()
        if self.form == "choice":
            return LETTERS[perm.index(LETTERS.index(self.answer))]
        if self.form == "select":
            return "".join(LETTERS[i] for i, p in enumerate(perm) if self.statements[p].true) or "none"
        if self.form == "order":
            return "".join(LETTERS[perm.index(i)] for i in range(len(perm)))
        if self.form == "blank":
            return self.blanks[0][0] if len(self.blanks) == 1 else [b[0] for b in self.blanks]
        if self.form == "code":
            from workbench.practice.concept_refs import get

            return get(self.ref).fn
        return self.model_text

    def explanation(self, attempt: int | None = None) -> str:
        refs = ("\n\nSources: " + "; ".join(self.references)) if self.references else ""
        return f"{self._model_text(attempt)}\n\n{self.why}{refs}"

    def _model_text(self, attempt: int | None) -> str:
        perm = self.order(attempt)
        items = self._items()
        if self.form == "choice":
            right = perm.index(LETTERS.index(self.answer))
            return f"The answer is **({LETTERS[right]})** {items[perm[right]]}"
        if self.form == "select":
            lines = [f"- **({LETTERS[i]})** {'true' if self.statements[p].true else 'false'}: "
                     f"{self.statements[p].text}" + (f" *{self.statements[p].why}*" if self.statements[p].why else "")
                     for i, p in enumerate(perm)]
            return "Each statement:\n\n" + "\n".join(lines)
        if self.form == "order":
            return "The order: " + self._order_text(perm)
        if self.form == "blank":
            return "The blank" + ("s: " if len(self.blanks) > 1 else ": ") + "; ".join(
                f"**{b[0]}**" + (f" (also accepted: {', '.join(b[1:])})" if len(b) > 1 else "") for b in self.blanks)
        if self.form == "code":
            from workbench.practice.concept_refs import get

            src = inspect.getsource(get(self.ref).fn)
            return f"A model answer:\n\n```python\n{src.rstrip()}\n```"
        rubric = "\n".join(f"- **({LETTERS[i]})** {r}" for i, r in enumerate(self.rubric))
        return f"Model answer: {self.model_text}\n\nRubric (mark the points your answer made):\n\n{rubric}"

    def _order_text(self, perm: list[int]) -> str:
        parts, i = [], 0
        for group in self.steps:
            letters = [LETTERS[perm.index(i + j)] for j in range(len(group))]
            parts.append(letters[0] if len(group) == 1 else "{" + ", ".join(letters) + " in either order}")
            i += len(group)
        items = self._items()
        listing = "\n".join(f"{n}. **({LETTERS[perm.index(k)]})** {items[k]}" for n, k in enumerate(range(len(items)),
                                                                                                 1))
        return f"**{' '.join(parts)}**\n\n{listing}"

    # -------------------------------------------------------------- grading
    def _grade(self, answer: Any) -> Grade:
        grader = {"choice": self._grade_choice, "select": self._grade_select, "order": self._grade_order,
                  "blank": self._grade_blank, "code": self._grade_code}.get(self.form)
        if grader is None:
            raise RuntimeError(f"drill {self.id}: an explain drill is self-graded (d.submit shows the rubric)")
        grade = grader(answer)
        if not grade.passed:
            again = (" Your next attempt shows them in a new order." if self.form in SHUFFLED else "")
            grade.feedback += f"\n\n{self.explanation(self._attempts)}" + (f"\n\n*{again.strip()}*" if again else "")
        else:
            grade.feedback += f"\n\n{self.why}" if self.form != "code" else f"\n\n{self.explanation(self._attempts)}"
        return grade

    def _letters(self, answer: Any, n: int, *, allow_empty: bool) -> list[str]:
        """Return the letters of ``answer`` among the first ``n`` (a str like "a c" / "a,c" / "ac", or letters)."""
        valid = LETTERS[:n]
        if isinstance(answer, str):
            text = answer.strip().lower()
            if allow_empty and text in ("", "none", "{}", "set()"):
                return []
            letters = [c for c in re.sub(r"[\s,;()\[\]{}'\"]+", "", text)]
        elif isinstance(answer, Iterable) and not isinstance(answer, (bytes, dict)):
            letters = []
            for x in answer:
                if not isinstance(x, str) or len(x.strip().strip("()")) != 1:
                    raise TypeError(f"drill {self.id}: every item is one letter of {list(valid)}, got {x!r}")
                letters.append(x.strip().strip("()").lower())
        else:
            raise TypeError(f"drill {self.id}: answer with letters (a str like \"ac\" or a set of letters), "
                            f"got {answer!r}")
        bad = sorted({c for c in letters if c not in valid})
        if bad:
            raise ValueError(f"drill {self.id}: {bad} are not among the letters {list(valid)}")
        if not letters and not allow_empty:
            raise ValueError(f"drill {self.id}: answer with one letter of {list(valid)}, got {answer!r}")
        return letters

    def _grade_choice(self, answer: Any) -> Grade:
        valid = LETTERS[:len(self.choices)]
        if not isinstance(answer, str):
            raise TypeError(f"drill {self.id}: answer with a letter (a str), got {answer!r}")
        letter = answer.strip().lower().strip("()")
        if len(letter) != 1 or letter not in valid:
            raise ValueError(f"drill {self.id}: answer with one letter of {list(valid)}, got {answer!r}")
        ok = letter == self.model_answer()
        return Grade(ok, "Right." if ok else f"Not ({letter}).", f"({letter})")

    def _grade_select(self, answer: Any) -> Grade:
        chosen = set(self._letters(answer, len(self.statements), allow_empty=True))
        perm = self.order()
        wrong = [LETTERS[i] for i, p in enumerate(perm) if (LETTERS[i] in chosen) != self.statements[p].true]
        n = len(perm)
        summary = "".join(sorted(chosen)) or "none"
        if not wrong:
            return Grade(True, f"Right: all {n} statements judged correctly.", summary)
        return Grade(False, f"{n - len(wrong)} of {n} statements judged correctly; not "
                            f"{', '.join(f'({c})' for c in wrong)}.", summary)

    def _grade_order(self, answer: Any) -> Grade:
        n = len(self._items())
        letters = self._letters(answer, n, allow_empty=False)
        if sorted(letters) != list(LETTERS[:n]):
            missing = sorted(set(LETTERS[:n]) - set(letters))
            twice = sorted({c for c in letters if letters.count(c) > 1})
            raise ValueError(f"drill {self.id}: give each of the {n} letters once, in order"
                             + (f"; missing {missing}" if missing else "") + (f"; repeated {twice}" if twice else ""))
        perm = self.order()
        group_of = [g for g, group in enumerate(self.steps) for _ in group]
        groups = [group_of[perm[LETTERS.index(c)]] for c in letters]
        summary = "".join(letters)
        first_bad = next((i for i in range(1, n) if groups[i] < groups[i - 1]), None)
        if first_bad is None:
            return Grade(True, "Right: every step is in its place.", summary)
        return Grade(False, f"Not yet: the order holds up to step {first_bad}; step {first_bad + 1}, "
                            f"({letters[first_bad]}), cannot come after ({letters[first_bad - 1]}).", summary)

    def _grade_blank(self, answer: Any) -> Grade:
        got = [answer] if isinstance(answer, str) else answer
        if not isinstance(got, (list, tuple)) or len(got) != len(self.blanks) or \
                not all(isinstance(g, str) and g.strip() for g in got):
            raise TypeError(f"drill {self.id}: answer with {len(self.blanks)} non-empty string(s), one per blank "
                            f"(a list for several), got {answer!r}")
        wrong = [i for i, (g, ok) in enumerate(zip(got, self.blanks, strict=True))
                 if normalise(g) not in {normalise(o) for o in ok}]
        summary = " | ".join(g.strip() for g in got)[:200]
        if not wrong:
            return Grade(True, "Right.", summary)
        which = ", ".join(f"blank {i + 1} ({got[i].strip()!r})" for i in wrong)
        return Grade(False, f"Not accepted: {which}.", summary)

    # -------------------------------------------------------------- concept as code
    def _as_function(self, answer: Any) -> Callable[..., Any]:
        """Return the submission as a function of the reference's parameters; a malformed one raises (no attempt)."""
        from workbench.practice.concept_refs import get

        params = get(self.ref).params
        if isinstance(answer, str):
            try:
                code = compile(answer.strip(), f"<{self.id}>", "eval")
            except SyntaxError as e:
                raise ValueError(f"drill {self.id}: the expression does not parse ({e.msg}); write it in "
                                 f"{', '.join(params)}") from None
            unknown = sorted(set(code.co_names) - set(params) - set(_MATH) - set(_SAFE_BUILTINS) - {"np", "math"})
            if unknown:
                raise ValueError(f"drill {self.id}: the expression uses {unknown}; it may use {list(params)}, math "
                                 "functions (exp, log, ...), np and builtins such as max")
            env = {"__builtins__": _SAFE_BUILTINS, "math": math, "np": np, **_MATH}
            return lambda *args: eval(code, env, dict(zip(params, args, strict=True)))  # noqa: S307  (the learner's own code)
        if not callable(answer):
            raise TypeError(f"drill {self.id}: answer with a function of ({', '.join(params)}) or an expression "
                            f"string, got {type(answer).__name__}")
        try:
            inspect.signature(answer).bind(*params)
        except TypeError:
            raise ValueError(f"drill {self.id}: the function must take {len(params)} argument(s), "
                             f"({', '.join(params)}) in this order") from None
        except ValueError:
            pass  # a builtin without a signature: call it and see
        return answer

    def _inputs(self) -> Iterable[tuple]:
        from workbench.practice.concept_refs import get

        r = get(self.ref)
        yield from r.fixed
        rng = random.Random(f"{self.id}|inputs")
        for _ in range(self.trials):
            yield r.draw(rng)

    def _grade_code(self, answer: Any) -> Grade:
        from workbench.practice.concept_refs import get

        r = get(self.ref)
        fn = self._as_function(answer)
        for n, args in enumerate(self._inputs()):
            want = r.fn(*_copies(args))
            call = f"f({', '.join(f'{p}={_fmt(a)}' for p, a in zip(r.params, args, strict=True))})"
            try:
                with np.errstate(all="ignore"):
                    got = fn(*_copies(args))
            except Exception as e:  # noqa: BLE001  (the learner's function failing is the finding)
                return Grade(False, f"Not yet: {call} raised {type(e).__name__}: {e}. The reference returns "
                                    f"{_fmt(want)}.", f"raised {type(e).__name__} at input {n + 1}")
            if not _same(got, want, r.rtol, r.atol):
                named = _classic_mistake(r, [args, *itertools.islice(self._inputs(), 40)], fn)
                return Grade(False, f"Not yet: {call} returned {_fmt(got)}; the reference returns {_fmt(want)}. "
                                    f"({n} input(s) agreed before this one.)" + named,
                             f"differs at input {n + 1}" + (" (a classic mistake)" if named else ""))
        total = len(r.fixed) + self.trials
        return Grade(True, f"Right: it agrees with the reference on all {total} inputs.", f"agrees on {total} inputs")

    # -------------------------------------------------------------- free text: self-graded
    def submit(self, answer: Any) -> Result:
        """Grade ``answer`` and record the attempt; an explain drill shows the model answer to self-assess."""
        if self.form != "explain":
            return super().submit(answer)
        from workbench.practice import store

        if not isinstance(answer, str) or len(answer.strip()) < 10:
            raise TypeError(f"drill {self.id}: answer with a few sentences (a str), got {answer!r}")
        self._written = answer.strip()
        seconds, over = self._time_taken()
        self._answer_seen = True
        store.record(self, "reveal", seconds=seconds, over_time=over,
                     answer=f"self-graded: model answer shown after writing: {self._written[:300]}")
        letters = LETTERS[:len(self.rubric)]
        feedback = (f"Free text is not graded by a program. Compare yours with the model answer, then record which "
                    f"rubric points you made: `d.self_assess(\"{letters[:2]}\")` (or \"none\", or \"{letters}\" for "
                    f"all). It is recorded as self-assessed, never as a pass.\n\n{self.explanation()}")
        return SelfGraded(self.id, self.kind, False, feedback, seconds, over)

    def self_assess(self, points: Any) -> Note:
        """Record which rubric points your written answer made (letters, "none"); return the summary line.

        The record is a ``self_assessed`` event whose score is the share of the rubric marked; never a pass.
        """
        if self.form != "explain":
            raise RuntimeError(f"drill {self.id} is graded by the program; self_assess is for explain drills")
        if self._written is None:
            raise RuntimeError(f"drill {self.id}: write your answer first, d.submit(\"...\"), then mark it")
        valid = LETTERS[:len(self.rubric)]
        made = sorted(set(self._letters(points, len(self.rubric), allow_empty=True)))
        missed = [f"({c}) {self.rubric[valid.index(c)]}" for c in valid if c not in made]
        line = f"self-assessed {len(made)}/{len(self.rubric)} rubric points ({''.join(made) or 'none'})"
        self._self_assessed(len(made) / len(self.rubric), note=line)
        msg = f"{self.id}: {line}; recorded as a self-assessment, not a pass."
        if missed:
            msg += " To work on: " + "; ".join(missed)
        return Note(msg)


class Note(str):
    """A line of text that a notebook shows as itself (no quotes), once."""

    def __repr__(self) -> str:
        return str(self)


def _classic_mistake(r: Any, inputs: list[tuple], learner: Callable[..., Any]) -> str:
    """Return a sentence naming the reference's classic wrong answer that ``learner`` gives (else "").

    ``inputs[0]`` is the input where ``learner`` first differs from the reference. A wrong answer that agrees with
    ``learner`` on every input is named; failing that, the only one that agrees at ``inputs[0]``.
    """
    def agree(wrong: Callable[..., Any], args: list[tuple]) -> bool:
        try:
            with np.errstate(all="ignore"):
                return all(_same(learner(*_copies(a)), wrong(*_copies(a)), r.rtol, r.atol) for a in args)
        except Exception:  # noqa: BLE001  (either failing to run names nothing)
            return False

    for name, wrong, mistake in r.wrong:
        if agree(wrong, inputs):
            return f" This is {name}: {mistake}."
    here = [(name, mistake) for name, wrong, mistake in r.wrong if agree(wrong, inputs[:1])]
    return f" This looks like {here[0][0]}: {here[0][1]}." if len(here) == 1 else ""


def _copies(args: tuple) -> tuple:
    """Return ``args`` with arrays and lists copied, so a function that writes into its inputs spoils nothing."""
    return tuple(a.copy() if isinstance(a, (np.ndarray, list)) else a for a in args)
