"""Exercise starters generated from their solution files, so a starter can never drift from its solution.

A solution file marks what the learner writes with regions; outside them the starter is the solution, line for line::

    # >>> learner
    #> # TODO: combine the 32 lanes' values with __shfl_xor_sync
    #> return v;
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
    # <<< learner

Inside a region, lines starting (after indentation) with ``#>`` are the starter's (without the ``#>`` and the
space after it, at the indentation of the ``#``); every other line is the solution's. C or CUDA code in a string
(a kernel's source) uses ``//`` instead of ``#``: ``// >>> learner``, ``//> ...``, ``// <<< learner``. The marker
lines themselves are in neither text, so both the starter and the solution read as they would on their own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_OPEN = re.compile(r"^\s*(#|//) >>> learner\s*$")
_CLOSE = re.compile(r"^\s*(#|//) <<< learner\s*$")
_STARTER = re.compile(r"^(?P<indent>\s*)(?P<leader>#|//)>(?: (?P<rest>.*))?$")


class RegionError(ValueError):
    """A solution file's learner regions are malformed (unclosed, nested, or a stray marker)."""


def _split(text: str, where: str) -> tuple[list[str], list[str]]:
    """Return (starter lines, solution lines) of a marked solution text."""
    starter: list[str] = []
    solution: list[str] = []
    leader = None  # the open region's comment leader, None outside regions
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        opened, closed = _OPEN.match(line), _CLOSE.match(line)
        if opened or closed:
            if bool(opened) == (leader is not None) or (closed and closed.group(1) != leader):
                raise RegionError(f"{where}:{n}: {'nested' if opened else 'unmatched'} learner region marker")
            leader = opened.group(1) if opened else None
            continue
        m = _STARTER.match(line.rstrip("\n"))
        if leader is not None and m and m.group("leader") == leader:
            end = "\n" if line.endswith("\n") else ""
            starter.append(f"{m.group('indent')}{m.group('rest') or ''}".rstrip() + end if m.group("rest")
                           else end)
        elif leader is not None:
            solution.append(line)
        else:
            starter.append(line)
            solution.append(line)
    if leader is not None:
        raise RegionError(f"{where}: a learner region is never closed")
    return starter, solution


def starter_text(solution_file: Path) -> str:
    """Return the starter a learner completes, generated from ``solution_file``'s learner regions."""
    return "".join(_split(Path(solution_file).read_text(), str(solution_file))[0])


def solution_text(solution_file: Path) -> str:
    """Return the solution as a learner reads it: ``solution_file`` without the region markers and starter lines."""
    return "".join(_split(Path(solution_file).read_text(), str(solution_file))[1])


def starter_file(solution_file: Path) -> Path:
    """Return a file holding the starter of ``solution_file`` (written on first use, rewritten when it changes).

    It lives in the workbench cache (``$WORKBENCH_CACHE/starters/<op>/``, else ``~/.cache/kernel-workbench``),
    named ``ex_<name>_starter.py`` like the solution, so ``learner_code.load_entry(ex.starter_file, ex.entry)``
    runs it and a traceback names a real file a learner can open.
    """
    solution_file = Path(solution_file)
    root = os.environ.get("WORKBENCH_CACHE")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernel-workbench"
    path = base / "starters" / solution_file.parent.name / solution_file.name.replace("_solution", "_starter")
    text = starter_text(solution_file)
    try:
        if path.read_text() == text:
            return path
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: two processes never read half a starter
    return path
