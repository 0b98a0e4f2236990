"""Assemble generated kernels line by line, compile them on the CPU engine and map compiler errors back.

A generated kernel is built from the learner's snippets (operation, map_expr, preamble, ...) and fixed code. The
builder remembers which lines of the generated source hold which snippet, so a compiler error at line 14 of the
generated kernel is reported as "line 2 of your operation", with both lines shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from workbench.cuda import CompileError, RawKernel

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
HEADER = "#include <cupy/carray.cuh>"
OPTIONS = (f"-I{INCLUDE_DIR}",)
_DIAG = re.compile(r"^(?P<file>[^\n]*?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<kind>fatal error|error|note|warning): "
                   r"(?P<msg>.*)$")


class KernelCompileError(CompileError):
    """A generated kernel did not compile; the message names the learner's snippet line and the generated line."""


@dataclass
class Snippet:
    """Where one of the learner's snippets sits in the generated source."""

    label: str  # "operation", "map_expr", ...
    first: int  # 1-based line of the generated source holding the snippet's first line
    lines: list[str]


@dataclass
class CodeBuilder:
    """Collects the generated source and the positions of the learner's snippets in it."""

    lines: list[str] = field(default_factory=lambda: [HEADER])
    snippets: list[Snippet] = field(default_factory=list)

    def add(self, text: str) -> None:
        """Append fixed (generated) code."""
        self.lines.extend(text.split("\n"))

    def add_snippet(self, label: str, text: str, template: str = "{}") -> None:
        """Append a learner's snippet, formatted into ``template`` (which must keep it on its own lines)."""
        first = len(self.lines) + 1 + template.split("{}")[0].count("\n")
        body = text.split("\n")
        self.snippets.append(Snippet(label, first, body))
        self.add(template.format(text))

    @property
    def code(self) -> str:
        return "\n".join(self.lines) + "\n"

    def snippet_at(self, line: int) -> tuple[Snippet, int] | None:
        """Return (snippet, 1-based line within it) for a line of the generated source, or None."""
        for s in self.snippets:
            if s.first <= line < s.first + len(s.lines):
                return s, line - s.first + 1
        return None


_compiled: dict[tuple, RawKernel | KernelCompileError] = {}


def compile_generated(who: str, b: CodeBuilder, name: str, options: tuple[str, ...] = ()) -> RawKernel:
    """Compile the generated kernel ``name`` (cached by its source) or raise :class:`KernelCompileError`.

    ``options`` are the kernel's NVRTC options; the CPU engine keeps the ones it understands (-D, -I, -std).
    """
    key = (b.code, name, tuple(options))
    k = _compiled.get(key)
    if k is None:
        # frontend=False: the generated source includes the CPU engine's stand-in for cupy's <cupy/carray.cuh>
        # (C++ library headers), which NVRTC cannot compile; on a GPU cupy generates its own source instead
        k = RawKernel(b.code, name, options=OPTIONS + tuple(options), frontend=False)
        try:
            k.compile()
        except CompileError as e:
            k = KernelCompileError(explain(who, b, e.log or str(e)), e.log)
        _compiled[key] = k  # a source that failed fails again: remember the error, not just the kernels
    if isinstance(k, KernelCompileError):
        raise KernelCompileError(str(k), k.log)
    return k


def explain(who: str, b: CodeBuilder, log: str) -> str:
    """Turn a compiler log into an error message that points into the learner's snippets and the generated code."""
    diags = [m for m in (_DIAG.match(ln.strip()) for ln in log.splitlines()) if m]
    ours = [m for m in diags if m["kind"] in ("error", "fatal error") and _is_generated(m["file"])]
    errors = ours or [m for m in diags if m["kind"] in ("error", "fatal error")]
    if not errors:
        return f"{who} failed to compile on the CPU engine:\n{log.strip()[-3000:]}"
    parts = [f"{who} failed to compile on the CPU engine (g++ standing in for NVRTC):"]
    marked: set[int] = set()
    seen: set[tuple[int, str]] = set()
    for m in errors:
        line = int(m["line"]) if _is_generated(m["file"]) else _generated_line_of(diags)
        if (line, m["msg"]) in seen:
            continue  # an error in a macro (REDUCE) repeats at every use
        seen.add((line, m["msg"]))
        if len(seen) > 4:
            break
        parts.append(_describe_error(b, m, line))
        if line:
            marked.add(line)
    parts.append("The generated kernel (the kernel's .cached_code); '>>' marks the failing lines:")
    parts.append(_listing(b, marked))
    return "\n".join(parts)


def _is_generated(file: str) -> bool:
    return file.strip() in ("<inline CUDA source>", "")


def _generated_line_of(diags: list[re.Match]) -> int:
    """Return the generated-source line a diagnostic in a header traces back to ("required from here"), or 0."""
    for m in diags:
        if _is_generated(m["file"]):
            return int(m["line"])
    return 0


def _describe_error(b: CodeBuilder, m: re.Match, line: int) -> str:
    msg = m["msg"].strip()
    where = b.snippet_at(line) if line else None
    if where is None:
        loc = f"line {line} of the generated kernel" if line else f"{m['file']}:{m['line']}"
        return f"  {loc} (generated code, not one of your snippets):\n    error: {msg}"
    s, k = where
    text = s.lines[k - 1].strip()
    return (f"  line {k} of your {s.label}: `{text}`\n    (line {line} of the generated kernel)\n"
            f"    error: {msg}")


def _listing(b: CodeBuilder, marked: set[int], context: int = 6) -> str:
    """Return the generated source with line numbers: all of it when short, else the lines around the marks."""
    lines = b.lines
    width = len(str(len(lines)))
    keep = set(range(1, len(lines) + 1))
    if len(lines) > 30 and marked:
        keep = {i for m in marked for i in range(m - context, m + context + 1) if 1 <= i <= len(lines)}
    out, last = [], 0
    for i, text in enumerate(lines, 1):
        if i not in keep:
            continue
        if i > last + 1:
            out.append(f"   {'.' * width} |")
        out.append(f"{'>>' if i in marked else '  '} {i:>{width}} | {text}")
        last = i
    return "\n".join(out)
