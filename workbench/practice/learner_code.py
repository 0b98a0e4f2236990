"""One loader and one schema for the two places a learner writes a kernel: exercises and implement drills.

Loader: :func:`load_entry` runs an exercise's starter or solution file, or the source text a learner submits to an
implement drill (written to a temporary file first, so Triton can read its kernels and tracebacks show its lines),
as a fresh module, and returns the function the learner writes.

Schema: an ``[[exercise]]`` table of ``kernels/<op>/exercises.toml`` and a ``kind = "implement"`` ``[[drill]]``
table of ``kernels/<op>/drills.toml`` share these keys, checked by :func:`parse_spec` into a :class:`LearnerSpec`
when the file is loaded (a missing, unknown or wrongly typed key fails there, naming the file and the table):

==============  ======================  ========================================================================
key             TOML                    meaning
==============  ======================  ========================================================================
statement       string                  markdown: what to write (required)
hints           array of strings        revealed one at a time (required in an exercise)
backend         string                  ``"cuda"``, ``"triton"`` or ``"numba"``: the check refuses work not done
                                        by that backend's launches (required in a drill; an exercise without one
                                        is checked for correctness only)
shapes          array of tables         the shapes the checker runs (default: the op's ragged check shapes)
dtypes          array of strings        the dtypes it runs (default: the checker's, or float32 in a drill)
seeds           array of integers       the input seeds (default: 0 and 1)
cases           array of strings        the op's input cases to run (default: all of them)
fixed_flags     array of strings        flags the shapes fix on purpose: their other values are not probed
budgets         table                   ``{metric = "<= 4  # why"}``: performance budgets (:mod:`workbench.budgets`)
budget_shape    table                   where the budgets are measured (needs ``budgets``; default: the op's cpu
                                        bench shape)
==============  ======================  ========================================================================

``shapes`` to ``budget_shape`` are the checker's own keywords (``wb.check``), passed on as given (arrays become
tuples). Beside these, an exercise has ``id``, ``title``, ``op``, ``solution`` and ``entry`` (all required); an
implement drill has the keys every drill has (``id``, ``kind``, ``level``, ``topic``, ``title``, optional ``op``),
``model`` (required) and ``inspect`` (see :mod:`workbench.practice.loading`).
"""

from __future__ import annotations

import atexit
import linecache
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.practice.base import DrillDataError

SCHEMA: dict[str, type] = {"statement": str, "hints": list, "backend": str, "shapes": list, "dtypes": list,
                           "seeds": list, "cases": list, "fixed_flags": list, "budgets": dict, "budget_shape": dict}
CHECK_KEYS = ("shapes", "dtypes", "seeds", "cases", "fixed_flags", "budgets", "budget_shape")  # wb.check keywords
BACKENDS = ("cuda", "triton", "numba")
_TMP: list[Path] = []


# ------------------------------------------------------------------------------------------------------ loader
def load_entry(code: str | os.PathLike, entry: str, where: str = "") -> Callable:
    """Run ``code`` (a file, or source text) as a fresh module and return its function ``entry``."""
    if isinstance(code, os.PathLike):
        path, module, origin = Path(code), f"workbench_exercise_{Path(code).stem}", str(code)
    else:
        path, module, origin = _answer_file(code, entry), f"workbench_drill_answer_{entry}", "your source"
    ns: dict[str, Any] = {"__name__": module, "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102  (our starter/solution, or the learner's)
    fn = ns.get(entry)
    if not callable(fn):
        raise NameError(f"{where + ': ' if where else ''}{origin} does not define {entry}()")
    return fn


def _answer_file(source: str, entry: str) -> Path:
    """Write ``source`` to a fresh temporary file (removed at exit) and return its path."""
    tmp = Path(tempfile.mkdtemp(prefix="wb-drill-"))
    _TMP.append(tmp)
    path = tmp / f"{entry}_answer.py"
    path.write_text(source)
    linecache.checkcache(str(path))
    return path


@atexit.register
def _cleanup() -> None:
    for p in _TMP:
        shutil.rmtree(p, ignore_errors=True)


# ------------------------------------------------------------------------------------------------------ schema
@dataclass(frozen=True)
class LearnerSpec:
    """The shared keys of an exercise or implement-drill table, checked: what to write and how it is checked."""

    statement: str
    hints: tuple[str, ...] = ()
    backend: str | None = None
    check: dict[str, Any] = field(default_factory=dict)  # the CHECK_KEYS the table sets, as wb.check takes them


def check_keys(where: str, data: Mapping[str, Any], required: Mapping[str, type],
               optional: Mapping[str, type]) -> None:
    """Refuse a missing key, an unknown key or a value of the wrong type, naming ``where``."""
    for key in required:
        if key not in data:
            raise DrillDataError(f"{where}: missing key {key!r}")
    for key, val in data.items():
        typ = required.get(key) or optional.get(key)
        if typ is None:
            raise DrillDataError(f"{where}: unknown key {key!r} (known: {sorted({*required, *optional})})")
        if typ is float and isinstance(val, int) and not isinstance(val, bool):
            continue
        if not isinstance(val, typ) or (typ is int and isinstance(val, bool)):
            raise DrillDataError(f"{where}: {key!r} must be a {typ.__name__}, got {type(val).__name__}")


def strings(where: str, key: str, items: list) -> tuple[str, ...]:
    """Return ``items`` as a tuple; refuse an entry that is not a non-empty string."""
    if not all(isinstance(s, str) and s.strip() for s in items):
        raise DrillDataError(f"{where}: every entry of {key!r} must be a non-empty string")
    return tuple(items)


def parse_spec(where: str, raw: Mapping[str, Any], own: Mapping[str, type] | None = None,
               required: Iterable[str] = ("statement",)) -> LearnerSpec:
    """Check a whole exercise or implement-drill table (``own``: the caller's keys beside the schema's)."""
    known = {**SCHEMA, **(own or {})}
    check_keys(where, raw, {k: known[k] for k in required}, known)
    if not raw["statement"].strip():
        raise DrillDataError(f"{where}: 'statement' is empty")
    backend = raw.get("backend")
    if backend is not None and backend not in BACKENDS:
        raise DrillDataError(f"{where}: backend {backend!r} is not one of {list(BACKENDS)}")
    return LearnerSpec(statement=raw["statement"].strip(), hints=strings(where, "hints", raw.get("hints", [])),
                       backend=backend, check=_check_options(where, raw))


def _check_options(where: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return the checker keywords of a table, converted (arrays to tuples) and validated."""
    from workbench.budgets import BudgetError, parse

    out: dict[str, Any] = {k: tuple(raw[k]) for k in CHECK_KEYS if isinstance(raw.get(k), list)}
    for key in ("dtypes", "cases", "fixed_flags"):
        strings(where, key, list(out.get(key, ())))
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in out.get("seeds", ())):
        raise DrillDataError(f"{where}: every entry of 'seeds' must be an integer")
    if not all(isinstance(s, dict) for s in out.get("shapes", ())):
        raise DrillDataError(f"{where}: every entry of 'shapes' must be a table of sizes ({{N = 64}})")
    if "shapes" in out:
        out["shapes"] = tuple(dict(s) for s in out["shapes"])
    if "budget_shape" in raw and not raw.get("budgets"):
        raise DrillDataError(f"{where}: 'budget_shape' says where budgets are measured, but there are no 'budgets'")
    try:
        parse(raw.get("budgets", {}), where)  # a misspelt metric or a limit that is not '<op> <number>' fails here
    except BudgetError as e:
        raise DrillDataError(str(e)) from None
    out.update({k: dict(raw[k]) for k in ("budgets", "budget_shape") if k in raw})
    return out
