"""Concept drills: multiple choice, or a short free-text answer graded on key ideas; the model answer follows.

A free-text answer passes when it names every key idea (each idea lists the words that count for it, matched
case-insensitively as word stems). Whatever the outcome, the model answer and its explanation are shown after
the attempt; a later attempt then counts as made after a reveal.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.base import Drill, Grade


@dataclass(frozen=True)
class KeyIdea:
    """One idea a free-text answer must contain: its name, and the word stems any of which shows it."""

    idea: str
    match: tuple[str, ...]

    def found_in(self, text: str) -> bool:
        low = text.lower()
        return any(re.search(r"(?<![a-z0-9])" + re.escape(m.lower()), low) for m in self.match)


@dataclass(eq=False, repr=False)
class ConceptDrill(Drill):
    """Explain or choose: ``d.submit("b")`` for multiple choice, ``d.submit("your words")`` for free text."""

    question: str = ""
    choices: tuple[str, ...] = ()
    answer: str = ""  # the correct letter (multiple choice)
    key_ideas: tuple[KeyIdea, ...] = ()
    model_text: str = ""  # the model answer (free text)
    why: str = ""  # markdown: the explanation shown after an attempt
    references: tuple[str, ...] = field(default_factory=tuple)

    @property
    def multiple_choice(self) -> bool:
        return bool(self.choices)

    def statement(self) -> str:
        if not self.multiple_choice:
            return self.question
        opts = "\n".join(f"- **({string.ascii_lowercase[i]})** {c}" for i, c in enumerate(self.choices))
        return f"{self.question}\n\n{opts}"

    def answer_format(self) -> str:
        if self.multiple_choice:
            letters = string.ascii_lowercase[:len(self.choices)]
            return f"one letter: `d.submit(\"{letters[0]}\")` ... `d.submit(\"{letters[-1]}\")`."
        return "a few sentences: `d.submit(\"...\")`; graded on the key ideas, the model answer follows."

    def _model_block(self) -> str:
        refs = ("\n\nSources: " + "; ".join(self.references)) if self.references else ""
        if self.multiple_choice:
            i = string.ascii_lowercase.index(self.answer)
            return f"The answer is **({self.answer})** {self.choices[i]}\n\n{self.why}{refs}"
        return f"Model answer: {self.model_text}\n\n{self.why}{refs}"

    def _grade(self, answer: Any) -> Grade:
        if not isinstance(answer, str) or not answer.strip():
            raise TypeError(f"drill {self.id}: answer with "
                            f"{'a letter' if self.multiple_choice else 'a few sentences'} (a non-empty str), "
                            f"got {answer!r}")
        if self.multiple_choice:
            letter = answer.strip().lower().strip("()")
            letters = string.ascii_lowercase[:len(self.choices)]
            if letter not in letters or len(letter) != 1:
                raise ValueError(f"drill {self.id}: answer with one letter of {list(letters)}, got {answer!r}")
            ok = letter == self.answer
            head = "Right." if ok else f"Not ({letter})."
            return Grade(ok, f"{head}\n\n{self._model_block()}", f"({letter})")
        found = [k for k in self.key_ideas if k.found_in(answer)]
        missing = [k.idea for k in self.key_ideas if k not in found]
        ok = not missing
        head = ("Right: your answer has every key idea." if ok else
                f"Your answer has {len(found)} of {len(self.key_ideas)} key ideas; missing: "
                + "; ".join(missing) + ".")
        return Grade(ok, f"{head}\n\n{self._model_block()}", answer.strip()[:200])

    def model_answer(self) -> str:
        return self.answer if self.multiple_choice else self.model_text

    def explanation(self) -> str:
        return self._model_block()
