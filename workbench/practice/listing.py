"""Turn a kernel's source files into the numbered listing a spot-the-bug drill shows, and back into code to run.

A known-wrong kernel lives in a real file (``kernels/<op>/wrong.py``, perhaps with a ``.cu``) next to comments that
name its bug and a ``@register(..., idea="KNOWN WRONG: ...")`` that says it outright. The listing a learner sees
is built from that file by pure text transformations, in this order:

1. ``fix`` (only for the corrected listing): replacements, each of which must occur exactly once in its file;
2. drop every ``@register(...)`` decorator;
3. ``resolve``: specialise ``if NAME == "value":`` / ``if NAME:`` blocks on constants (``BUG="no_rescale"``), the
   way a constexpr specialises a Triton kernel at launch;
4. ``edits``: presentation replacements (drop a now-unused ``BUG`` parameter), each must occur;
5. ``rename``: whole-word renames of names that give the bug away (``add_off_by_one`` -> ``vecadd_kernel``);
   a new name must not already occur in the file;
6. extract the shown top-level definitions (Python functions and constants, CUDA C functions and #defines);
7. strip comments and docstrings (all of them: the bug's comments are among them), trailing spaces and runs of
   blank lines.

The answer key is not typed: it is the set of listing lines that must change for the fix: the lines that differ
between the listing of the file as it is and the listing of the file with ``fix`` applied (for an inserted line,
the two lines around the gap). A line that only changes its whitespace, and a line that is blank or holds only
braces and punctuation (``}``, ``{``, ``};``), never counts: no one fixes a bug by pointing at a brace.

The checker's messages name lines of the real files (``wrong_gemm.cu:26``); :func:`map_lines` carries such a line
to the listing's numbering by aligning the file's lines with the shown ones.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import re
import textwrap
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ListingError(ValueError):
    """A spot-the-bug listing cannot be built as its drill describes; the message says which step failed."""


@dataclass(frozen=True)
class Part:
    """One shown piece of code: its caption, language ("python"/"cuda") and lines (already stripped)."""

    caption: str
    language: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Listing:
    """The parts a learner sees; lines are numbered from 1 across all parts, in order."""

    parts: tuple[Part, ...]

    @property
    def lines(self) -> list[str]:
        return [s for p in self.parts for s in p.lines]

    def line(self, n: int) -> str:
        """Return line ``n`` (1-based)."""
        return self.lines[n - 1]

    def find(self, text: str) -> list[int]:
        """Return the numbers of the lines that contain ``text``."""
        return [i for i, s in enumerate(self.lines, 1) if text in s]

    def markdown(self) -> str:
        """Return the parts as numbered fenced code blocks (numbers continue across parts)."""
        from workbench.practice.render import numbered

        out, n = [], 1
        width = len(str(len(self.lines)))
        for p in self.parts:
            lang = "python" if p.language == "python" else "cpp"
            out.append(f"*{p.caption}*\n\n" + numbered(p.lines, n, lang, width))
            n += len(p.lines)
        return "\n\n".join(out)


# ------------------------------------------------------------------------------------------------ transformations


def apply_fixes(text: str, fixes: Sequence[tuple[str, str]], where: str) -> str:
    """Replace each ``old`` by ``new``; each ``old`` must occur exactly once in ``text``."""
    for old, new in fixes:
        n = text.count(old)
        if n != 1:
            raise ListingError(f"{where}: fix text {old!r} occurs {n} times; it must occur exactly once")
        text = text.replace(old, new)
    return text


@functools.lru_cache(maxsize=256)  # pure, on strings: a drill's listing redoes it for every answer graded
def drop_register_decorators(text: str, where: str) -> str:
    """Remove every ``@register(...)`` / ``@workbench.register(...)`` decorator (they name the bug)."""
    tree = _parse(text, where)
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for dec in node.decorator_list:
                call = dec.func if isinstance(dec, ast.Call) else dec
                name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
                if name == "register":
                    drop.update(range(dec.lineno, (dec.end_lineno or dec.lineno) + 1))
    return "".join(s for i, s in enumerate(text.splitlines(keepends=True), 1) if i not in drop)


def _parse(text: str, where: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as e:
        raise ListingError(f"{where}: does not parse as Python after the transformations so far: {e}") from e


def _const_test(test: ast.expr, consts: dict[str, object]) -> bool | None:
    """Return the value of an ``if`` test on a resolved constant, or None when the test is not one."""
    if isinstance(test, ast.Name) and test.id in consts:
        return bool(consts[test.id])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _const_test(test.operand, consts)
        return None if inner is None else not inner
    if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id in consts
            and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)):
        value, other = consts[test.left.id], test.comparators[0].value
        if isinstance(test.ops[0], ast.Eq):
            return value == other
        if isinstance(test.ops[0], ast.NotEq):
            return value != other
    return None


def _block(lines: list[str], first: int, last: int, indent: int) -> list[str]:
    """Return source lines ``first..last`` (1-based) re-indented to column ``indent``."""
    body = textwrap.dedent("".join(lines[first - 1:last]))
    return [(" " * indent + s if s.strip() else s) for s in body.splitlines(keepends=True)]


def _resolve_one(text: str, consts: dict[str, object], where: str) -> str | None:
    """Resolve the first ``if`` on a constant in ``text``; None when there is none left."""
    lines = text.splitlines(keepends=True)
    for node in ast.walk(_parse(text, where)):
        if not isinstance(node, ast.If):
            continue
        value = _const_test(node.test, consts)
        if value is None:
            continue
        if node.body[0].lineno == node.lineno:
            raise ListingError(f"{where}: line {node.lineno}: resolve needs the if's body on its own lines")
        indent = node.col_offset
        if value:
            keep = _block(lines, node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno, indent)
        elif node.orelse:
            first = node.orelse[0]
            is_elif = lines[first.lineno - 1].lstrip().startswith("elif")
            start = first.lineno
            keep = _block(lines, start, node.end_lineno or start, indent)
            if is_elif:
                keep[0] = keep[0].replace("elif", "if", 1)
        else:
            keep = []
        return "".join(lines[:node.lineno - 1] + keep + lines[(node.end_lineno or node.lineno):])
    return None


def resolve(text: str, consts: dict[str, object], where: str) -> str:
    """Specialise every ``if`` whose test is a constant of ``consts`` (``if BUG == "x":``, ``if DOT_F16:``)."""
    if not consts:
        return text
    for _ in range(1000):
        out = _resolve_one(text, consts, where)
        if out is None:
            return text
        text = out
    raise ListingError(f"{where}: resolve did not finish")


def apply_edits(text: str, edits: Sequence[tuple[str, str]], where: str) -> str:
    """Replace every occurrence of each ``old`` by ``new``; each ``old`` must occur at least once."""
    for old, new in edits:
        if old not in text:
            raise ListingError(f"{where}: edit text {old!r} does not occur")
        text = text.replace(old, new)
    return text


def apply_renames(texts: dict[str, str], renames: dict[str, str], where: str,
                  checked: Sequence[str] = ("py", "cu")) -> dict[str, str]:
    """Rename whole words in every text; a new name must not already be a name in the ``checked`` texts."""
    for old, new in renames.items():
        if not (_IDENT.match(old) and _IDENT.match(new)):
            raise ListingError(f"{where}: rename {old!r} -> {new!r}: both must be identifiers")
        for key, t in texts.items():
            if key not in checked:
                continue
            if new in identifiers(t, python=not key.endswith((".cu", ".cuh")) and key != "cu"):
                raise ListingError(f"{where}: rename {old!r} -> {new!r}: {new!r} is already a name in {key}")
        texts = {k: (_rename_python(t, old, new) if k not in ("cu",) and not k.endswith((".cu", ".cuh"))
                     else re.sub(rf"\b{re.escape(old)}\b", new, t)) for k, t in texts.items()}
    return texts


@functools.lru_cache(maxsize=256)  # pure, on strings: a drill's listing redoes it for every answer graded
def _rename_python(text: str, old: str, new: str) -> str:
    """Rename ``old`` to ``new`` and keep continuation lines aligned with the brackets they were aligned with."""
    pat = re.compile(rf"\b{re.escape(old)}\b")
    delta = len(new) - len(old)
    lines = text.splitlines(keepends=True)
    shift = [0] * len(lines)
    if delta:
        try:
            toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, SyntaxError):
            toks = []
        start = None
        for tok in toks:  # one logical line: from its first token to its NEWLINE
            if start is None and tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                start = tok.start[0]
            if tok.type == tokenize.NEWLINE and start is not None:
                first = start - 1
                cols = [m.start() for m in pat.finditer(lines[first])]
                for j in range(first + 1, tok.end[0]):
                    indent = len(lines[j]) - len(lines[j].lstrip(" "))
                    shift[j] = delta * sum(c < indent for c in cols) if lines[j].strip() else 0
                start = None
    out = []
    for s, d in zip(lines, shift, strict=True):
        s = pat.sub(new, s)
        if d > 0:
            s = " " * d + s
        elif d < 0:
            s = s[min(-d, len(s) - len(s.lstrip(" "))):]
        out.append(s)
    return "".join(out)


@functools.lru_cache(maxsize=256)  # pure, on strings: a drill's listing redoes it for every answer graded
def identifiers(text: str, python: bool = True) -> frozenset[str]:
    """Return the names used as code in ``text``: not in strings or comments, nor the module paths of imports."""
    if python:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        if tree is not None:
            out: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Name):
                    out.add(node.id)
                elif isinstance(node, ast.arg):
                    out.add(node.arg)
                elif isinstance(node, ast.Attribute):
                    out.add(node.attr)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(node.name)
                elif isinstance(node, ast.alias):
                    out.add(node.asname or node.name.split(".")[0])
            return frozenset(out)
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(strip_c(text))))


# ------------------------------------------------------------------------------------------------ extraction


@functools.lru_cache(maxsize=256)  # pure, on strings: a drill's listing redoes it for every answer graded
def extract_python(text: str, name: str, where: str) -> str:
    """Return the top-level function, class or constant assignment ``name`` of ``text`` (decorators included)."""
    tree = _parse(text, where)
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        start = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t for tg in targets for t in (tg.elts if isinstance(tg, ast.Tuple) else [tg])]
            if any(isinstance(t, ast.Name) and t.id == name for t in names):
                start = node.lineno
        if start is not None:
            return "".join(lines[start - 1:node.end_lineno])
    raise ListingError(f"{where}: no top-level definition named {name!r}")


@functools.lru_cache(maxsize=256)  # pure, on strings: a drill's listing redoes it for every answer graded
def _strip_docstrings(text: str) -> str:
    tree = ast.parse(text)
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str) and len(node.body) > 1:
                drop.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return "".join(s for i, s in enumerate(text.splitlines(keepends=True), 1) if i not in drop)


def strip_python(text: str) -> list[str]:
    """Return the lines of ``text`` without comments, docstrings, trailing spaces or repeated blank lines."""
    text = _strip_docstrings(text)
    lines = text.splitlines()
    cut: dict[int, int] = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            cut[tok.start[0]] = tok.start[1]
    out: list[str] = []
    for i, s in enumerate(lines, 1):
        if i in cut:
            s = s[:cut[i]].rstrip()
            if not s.strip():
                continue  # the line was only a comment
        out.append(s.rstrip())
    return _squeeze(out)


def strip_c(text: str) -> list[str]:
    """Return the lines of C/C++ ``text`` without // and /* */ comments (strings respected), like ``strip_python``."""
    out, i, n = [], 0, len(text)
    buf: list[str] = []
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            buf.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            buf.append("\x00")  # marks a line that held a comment
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            buf.append("\x00" + "\n" * text.count("\n", i, j))
            i = j
        else:
            buf.append(c)
            i += 1
    for s in "".join(buf).splitlines():
        had_comment = "\x00" in s
        s = s.replace("\x00", "").rstrip()
        if had_comment and not s.strip():
            continue
        out.append(s)
    return _squeeze(out)


def _squeeze(lines: list[str]) -> list[str]:
    out: list[str] = []
    for s in lines:
        if not s and (not out or not out[-1]):
            continue
        out.append(s)
    while out and not out[-1]:
        out.pop()
    return out


def extract_c(text: str, name: str, where: str) -> str:
    """Return the CUDA C function ``name`` (signature to closing brace) or the ``#define name`` line of ``text``."""
    lines = text.splitlines(keepends=True)
    for s in lines:
        if re.match(rf"\s*#\s*define\s+{re.escape(name)}\b", s):
            return s
    m = re.search(rf"^[^\n;{{}}]*\b{re.escape(name)}\s*\(", text, flags=re.M)
    if m is None:
        raise ListingError(f"{where}: no CUDA C function or #define named {name!r}")
    start = m.start()
    open_at = text.find("{", m.end())
    if open_at < 0:
        raise ListingError(f"{where}: function {name!r} has no body")
    depth, i = 0, open_at
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1] + "\n"
        i += 1
    raise ListingError(f"{where}: function {name!r} has unbalanced braces")


_TRIVIAL = re.compile(r"^[\s{}()\[\];,:]*$")


def is_trivial(line: str) -> bool:
    """True for a line that is never a bug by itself: blank, or only braces, brackets and punctuation (``};``)."""
    return bool(_TRIVIAL.match(line))


def _squash(line: str) -> str:
    return re.sub(r"\s+", "", line)


def answer_key(wrong: Sequence[str], fixed: Sequence[str]) -> list[int]:
    """Return the 1-based lines of ``wrong`` that must change to give ``fixed``.

    A replaced or deleted line counts unless it is trivial (:func:`is_trivial`) or its replacement differs from it
    only in whitespace; an inserted line makes the non-trivial lines on either side of the gap count (an inserted
    run of trivial lines, a lone ``}``, adds none).
    """
    key: set[int] = set()
    sm = difflib.SequenceMatcher(None, list(wrong), list(fixed), autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            kept = {_squash(s) for s in fixed[j1:j2]}
            key.update(i + 1 for i in range(i1, i2) if not is_trivial(wrong[i]) and _squash(wrong[i]) not in kept)
        elif tag == "insert" and not all(is_trivial(s) for s in fixed[j1:j2]):
            key.update(n for n in (i1, i1 + 1) if 1 <= n <= len(wrong) and not is_trivial(wrong[n - 1]))
    return sorted(key)


# ------------------------------------------------------------------------------------------------ file lines


def blank_c_comments(text: str) -> str:
    """Return C/C++ ``text`` with its comments replaced by spaces, line breaks kept (strings respected)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_python_comments(text: str) -> str:
    """Return Python ``text`` with its comments cut, line breaks kept."""
    lines = text.splitlines()
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    for tok in toks:
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(lines)


def map_lines(file_lines: Sequence[str], shown: Sequence[str]) -> dict[int, int]:
    """Return {index in ``file_lines``: index in ``shown``} for the lines that are the same code (0-based).

    Both sides are compared without whitespace (comments already blanked, renames already applied); lines only one
    side has (a resolved-away branch, a docstring) are left out, and a changed line between two matched ones (an
    edit) is matched with its counterpart when the two runs have the same length.
    """
    a = [(i, _squash(s)) for i, s in enumerate(file_lines) if _squash(s)]
    b = [(j, _squash(s)) for j, s in enumerate(shown) if _squash(s)]
    out: dict[int, int] = {}
    sm = difflib.SequenceMatcher(None, [s for _, s in a], [s for _, s in b], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out.update((a[i][0], b[j][0]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
    return out


def item_lines(text: str, name: str, c_file: bool, where: str) -> tuple[int, int]:
    """Return the 1-based first and last line of top-level ``name`` in the file ``text`` (Python, or C with c_file)."""
    block = extract_c(text, name, where) if c_file else extract_python(text, name, where)
    start = text.find(block.rstrip("\n"))
    if start < 0:
        raise ListingError(f"{where}: cannot place {name!r} in its file")
    first = text.count("\n", 0, start) + 1
    return first, first + block.rstrip("\n").count("\n")


def read(path: Path) -> str:
    """Return the text of ``path`` (a clear error when it is missing)."""
    try:
        return path.read_text()
    except OSError as e:
        raise ListingError(f"cannot read {path}: {e}") from e
