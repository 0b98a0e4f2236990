"""Spot-the-bug drills: a known-wrong kernel's source without its telltale comments; answer with the bug's line(s).

One drill per registered known-wrong kernel. The listing comes from the kernel's real file(s) through the
transformations of :mod:`workbench.practice.listing`; the answer key is derived, not typed: the lines of the
listing that change when the drill's ``fix`` is applied to the file. ``verify(drill)`` runs both versions of the
file (as it is, and fixed) through the checker, which is how the tests prove that the lines that change are the
bug: the file as it is fails with the kernel's declared diagnosis, the fixed file passes.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.practice import listing as L
from workbench.practice.base import Drill, Grade

_REPORTS: dict[str, Any] = {}  # the checker's report of each known-wrong kernel, once per session
_TMP: list[Path] = []


@dataclass(frozen=True)
class BugAnswer:
    """A spot-the-bug answer: the line number(s) of the bug and, optionally, the checker's diagnosis."""

    lines: tuple[int, ...]
    diagnosis: str | None = None

    def __init__(self, lines: int | list[int] | tuple[int, ...], diagnosis: str | None = None) -> None:
        object.__setattr__(self, "lines", _as_lines(lines))
        object.__setattr__(self, "diagnosis", None if diagnosis is None else str(diagnosis).strip().lower())


def _as_lines(lines: Any) -> tuple[int, ...]:
    if isinstance(lines, bool):
        raise TypeError(f"spot-the-bug: a line number is an int, got {lines!r}")
    if isinstance(lines, int):
        return (lines,)
    if isinstance(lines, (list, tuple, set, frozenset)) and lines and all(
            isinstance(n, int) and not isinstance(n, bool) for n in lines):
        return tuple(sorted(set(lines)))
    raise TypeError(f"spot-the-bug: answer with a line number or a list of line numbers, got {lines!r}")


@dataclass(frozen=True)
class Fix:
    """One replacement in the kernel's Python file (``file="py"``) or its CUDA C file (``file="cu"``)."""

    old: str
    new: str
    file: str = "py"


@dataclass(eq=False, repr=False)
class SpotTheBugDrill(Drill):
    """Find the bug in a known-wrong kernel: ``d.submit(7)``, ``d.submit([7, 9])`` or with a ``BugAnswer``."""

    variant: str = ""
    show_items: tuple[str, ...] = ()
    renames: dict[str, str] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)
    edits: tuple[tuple[str, str, str], ...] = ()  # (file, old, new)
    fixes: tuple[Fix, ...] = ()
    context: str = ""  # markdown: what the code is for and how it is launched
    why: str = ""  # markdown: the explanation shown with the answer
    check_shapes: tuple[dict, ...] | None = None  # the shapes of the feedback's checker run (default: the op's)
    witness: dict | None = None  # the cheapest shape where the kernel fails with its diagnosis (for the tests)
    correct: dict[str, str] = field(default_factory=dict)  # shown name -> "module:function" of a correct kernel

    # -------------------------------------------------------------- the listing
    @property
    def kernel(self) -> Any:
        """Return the registered known-wrong variant this drill shows."""
        import workbench as wb

        return wb.variant(self.op, self.variant)

    def _texts(self, fixed: bool, for_listing: bool) -> dict[str, str]:
        v = self.kernel
        texts = {"py": L.read(Path(v.source))}
        if v.cu_file is not None:
            texts["cu"] = L.read(Path(v.cu_file))
        where = f"drill {self.id}"
        if fixed:
            for f in self.fixes:
                if f.file not in texts:
                    raise L.ListingError(f"{where}: fix for file {f.file!r}, but {v.op}/{v.name} has no such file")
                texts[f.file] = L.apply_fixes(texts[f.file], [(f.old, f.new)], f"{where} ({f.file})")
        texts["py"] = L.drop_register_decorators(texts["py"], where)
        if not for_listing:
            return texts
        texts["py"] = L.resolve(texts["py"], self.consts, where)
        for file, old, new in self.edits:
            texts[file] = L.apply_edits(texts[file], [(old, new)], f"{where} ({file})")
        for item in self.show_items:
            path, _ = _split_item(item)
            if path not in ("py", "cu") and path not in texts:
                texts[path] = L.drop_register_decorators(L.read(Path(v.source).parent / path), where) \
                    if path.endswith(".py") else L.read(Path(v.source).parent / path)
        return L.apply_renames(texts, self.renames, where)

    def listing(self, fixed: bool = False) -> L.Listing:
        """Return the numbered listing the learner sees (``fixed=True``: the same listing with the fix applied)."""
        texts = self._texts(fixed, for_listing=True)
        parts = []
        for item in self.show_items:
            path, name = _split_item(item)
            name = self.renames.get(name, name)
            text = texts[path]
            if path == "cu" or path.endswith((".cu", ".cuh")):
                lines = L.strip_c(L.extract_c(text, name, f"drill {self.id}"))
                parts.append(L.Part("CUDA C", "cuda", tuple(lines)))
            else:
                src = L.extract_python(text, name, f"drill {self.id}")
                caption = ("Triton kernel" if "@triton.jit" in src else "Numba CUDA kernel" if "@cuda.jit" in src
                           else "Python")
                parts.append(L.Part(caption, "python", tuple(L.strip_python(src))))
        return L.Listing(_merge_parts(parts))

    def key(self) -> list[int]:
        """Return the answer key: the listing lines that the fix changes (both neighbours of an inserted line)."""
        key = L.answer_key(self.listing().lines, self.listing(fixed=True).lines)
        if not key:
            raise L.ListingError(f"drill {self.id}: the fix changes nothing in the listing")
        return key

    # -------------------------------------------------------------- the drill
    def statement(self) -> str:
        import workbench as wb

        op = wb.get_op(self.op)
        return (f"{self.context}\n\nThe contract: `{op.signature}`. One thing in this code is wrong; the rest is "
                f"right. Which line(s)?\n\n{self.listing().markdown()}")

    def answer_format(self) -> str:
        from workbench.checker import DIAGNOSES

        return ("the line number(s) of the bug: `d.submit(12)` or `d.submit([12, 14])`; name what the checker would "
                "say too with `d.submit(BugAnswer(12, 'masking'))` (one of " + ", ".join(sorted(DIAGNOSES)) + ").")

    def checker_report(self) -> Any:
        """Return what the checker reports for this kernel (first dtype, one seed; run once per session)."""
        import workbench as wb

        shapes = list(self.check_shapes) if self.check_shapes else None
        key = json.dumps([self.op, self.variant, shapes], sort_keys=True, default=str)
        if key not in _REPORTS:
            v = self.kernel
            _REPORTS[key] = wb.check(v, shapes=shapes, dtypes=v.dtypes[:1], quick=True)
        return _REPORTS[key]

    def _grade(self, answer: Any) -> Grade:
        from workbench.checker import DIAGNOSES

        ans = answer if isinstance(answer, BugAnswer) else (
            BugAnswer(answer.get("lines", ()), answer.get("diagnosis")) if isinstance(answer, dict) else
            BugAnswer(answer))
        if ans.diagnosis is not None and ans.diagnosis not in DIAGNOSES:
            raise ValueError(f"drill {self.id}: diagnosis {ans.diagnosis!r} is not one of the checker's: "
                             f"{sorted(DIAGNOSES)}")
        lst = self.listing()
        n = len(lst.lines)
        key = set(self.key())
        expected = self.kernel.expected_diagnosis
        report = self.checker_report()
        outside = [x for x in ans.lines if not 1 <= x <= n]
        wrong_lines = [x for x in ans.lines if x not in key]
        lines_ok = not outside and not wrong_lines
        diag_ok = ans.diagnosis is None or ans.diagnosis == expected
        checker = f"What the checker reports for this kernel:\n\n```\n{report.summary()}\n```"
        summary = f"lines {list(ans.lines)}" + (f", diagnosis {ans.diagnosis}" if ans.diagnosis else "")
        if outside:
            return Grade(False, f"The listing has lines 1..{n}; {outside} is outside it.", summary)
        if lines_ok and diag_ok:
            fb = [f"Right: the bug is on line{'s' if len(key) > 1 else ''} {sorted(key)}."]
            if ans.diagnosis:
                fb.append(f"And the checker does say `{expected}`.")
            fb += [self.why, checker, "The fix:\n\n" + _diff(lst, self.listing(fixed=True))]
            return Grade(True, "\n\n".join(fb), summary)
        fb = []
        if not lines_ok:
            fb.append(f"Not quite: line{'s' if len(wrong_lines) > 1 else ''} {wrong_lines} "
                      f"{'are' if len(wrong_lines) > 1 else 'is'} fine as written.")
        else:
            fb.append("The lines are right.")
        if not diag_ok:
            fb.append(f"The checker does not say `{ans.diagnosis}` for this kernel (see its report below).")
        fb.append(checker)
        fb.append("Stuck? `d.hint()`; `d.reveal()` shows the answer (recorded as a reveal).")
        return Grade(False, "\n\n".join(fb), summary)

    def model_answer(self) -> BugAnswer:
        return BugAnswer(self.key(), self.kernel.expected_diagnosis)

    def explanation(self) -> str:
        lst = self.listing()
        key = self.key()
        shown = "\n".join(f"{k}: {lst.line(k).strip()}" for k in key)
        return (f"Line(s) {key}:\n\n```\n{shown}\n```\n\n{self.why}\n\nThe checker says `"
                f"{self.kernel.expected_diagnosis}`. The fix:\n\n{_diff(lst, self.listing(fixed=True))}")

    # -------------------------------------------------------------- the correct kernel it derives from
    def counterpart_mismatches(self) -> list[str]:
        """Return the shown names whose fixed listing is not the correct kernel named in ``correct``.

        Compared as syntax trees (comments, docstrings, formatting and the function's own name do not count), so
        an empty list means: with the fix applied, the shown code *is* that correct kernel, and the answer key is
        exactly the lines where the known-wrong kernel departs from it.
        """
        import importlib

        texts = self._texts(True, for_listing=True)
        bad = []
        for shown, target in self.correct.items():
            mod_name, func = target.split(":", 1)
            mod = importlib.import_module(mod_name)
            theirs = L.extract_python(L.read(Path(mod.__file__)), func, target)
            ours = L.extract_python(texts["py"], shown, f"drill {self.id}")
            if _normalized(ours) != _normalized(theirs):
                bad.append(f"{shown} != {target}")
        return bad

    # -------------------------------------------------------------- running both versions
    def materialize(self, fixed: bool) -> Callable:
        """Return the kernel's host function, run from a copy of its file(s) as they are or with the fix applied.

        The copy (the ``@register`` decorators dropped, nothing else changed) lives in a temporary folder with the
        CUDA C file at the same relative path, so the module finds it as the original does.
        """
        v = self.kernel
        texts = self._texts(fixed, for_listing=False)
        tmp = Path(tempfile.mkdtemp(prefix=f"wb-spot-{self.id}-"))
        _TMP.append(tmp)
        src = Path(v.source)
        opdir = tmp / src.parent.name  # tmp mirrors kernels/: the op's folder, and the headers its .cu includes
        opdir.mkdir()
        py = opdir / src.name
        py.write_text(texts["py"])
        if v.cu_file is not None:
            _copy_cuda(Path(v.cu_file), texts["cu"], src.parent, tmp)
        ns: dict[str, Any] = {"__name__": f"workbench_spot_{self.id.replace('-', '_')}_{int(fixed)}",
                              "__file__": str(py)}
        exec(compile(texts["py"], str(py), "exec"), ns)  # noqa: S102  (the project's own kernel file)
        return ns[v.fn.__name__]


def _copy_cuda(cu: Path, text: str, op_dir: Path, tmp: Path) -> None:
    """Write ``text`` as ``cu``'s copy under ``tmp`` (a mirror of kernels/), with every local header it includes."""
    from workbench.cuda.toolchain import local_includes

    kernels_dir = op_dir.parent.resolve()
    for header in local_includes(text, cu.parent):
        try:
            dest = tmp / header.relative_to(kernels_dir)
        except ValueError:
            continue  # a header outside kernels/: the compiler finds it where it is
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(header, dest)
    target = tmp / op_dir.name / cu.relative_to(op_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _split_item(item: str) -> tuple[str, str]:
    """Return (file, name) of a show item: ``name`` (the kernel's Python file), ``cu:name``, ``path:name``."""
    if ":" in item:
        path, name = item.split(":", 1)
        return path, name
    return "py", item


def _merge_parts(parts: list[L.Part]) -> tuple[L.Part, ...]:
    """Join consecutive parts of the same caption into one block, a blank line between them."""
    out: list[L.Part] = []
    for p in parts:
        if out and out[-1].caption == p.caption:
            out[-1] = L.Part(p.caption, p.language, out[-1].lines + ("",) + p.lines)
        else:
            out.append(p)
    return tuple(out)


def _diff(wrong: L.Listing, fixed: L.Listing) -> str:
    import difflib

    d = difflib.unified_diff(wrong.lines, fixed.lines, "as written", "fixed", n=1, lineterm="")
    return "```diff\n" + "\n".join(d) + "\n```"


@atexit.register
def _cleanup() -> None:
    for p in _TMP:
        shutil.rmtree(p, ignore_errors=True)


def _normalized(src: str) -> str:
    """Return a top-level function's syntax tree as text, without its decorators, docstrings or its own name."""
    import ast

    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    top = tree.body[0]
    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
        top.name = "_"
        top.decorator_list = []  # @register is dropped from the listing; @triton.jit is on both sides
    return ast.dump(tree, include_attributes=False)
