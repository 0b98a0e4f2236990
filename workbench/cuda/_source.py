"""Read CUDA sources and do the light source-to-source rewrites the CPU engine needs (line numbers preserved)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from workbench.cuda.errors import CudaError


@dataclass
class Source:
    """A kernel source: its text and, when it came from a file, the file's absolute path."""

    text: str
    path: str | None

    @property
    def display_name(self) -> str:
        """Return the name diagnostics should use for this source."""
        return self.path or "<inline CUDA source>"


def load_source(code: str | os.PathLike) -> Source:
    """Return the source for ``code``, which is CUDA text or a path to a ``.cu``/``.cuh`` file."""
    if isinstance(code, os.PathLike):
        p = Path(code)
    elif isinstance(code, str) and "\n" not in code and code.strip().endswith((".cu", ".cuh", ".cpp", ".h")):
        p = Path(code.strip())
    else:
        if not isinstance(code, str):
            raise TypeError(f"kernel code must be CUDA source text or a path to a .cu file, got {type(code).__name__}")
        return Source(code, None)
    if not p.is_file():
        raise CudaError(f"CUDA source file not found: {str(p)!r} (cwd: {os.getcwd()})")
    p = p.resolve()
    return Source(p.read_text(), str(p))


def mask_comments_and_strings(src: str) -> str:
    """Return ``src`` with comments and string/char literal contents blanked (same length, newlines kept)."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if src[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _match_paren(text: str, i: int, open_c: str = "(", close_c: str = ")") -> int:
    """Return the index of the bracket closing the one at ``text[i]``."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    raise CudaError("unbalanced brackets in a kernel signature")


def _split_params(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` at top-level commas; return (start, end) spans."""
    spans, depth, s = [], 0, start
    for j in range(start, end):
        c = text[j]
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((s, j))
            s = j + 1
    if text[s:end].strip():
        spans.append((s, end))
    return spans


@dataclass
class Param:
    """One kernel parameter: its C type text and name."""

    type: str
    name: str
    span: tuple[int, int]


@dataclass
class KernelDecl:
    """A ``__global__`` function found in the source."""

    name: str
    is_template: bool
    line: int
    params: list[Param] = field(default_factory=list)
    is_definition: bool = True


_GLOBAL = re.compile(r"\b__global__\b")
_SKIP = re.compile(r"\s*(?:(?:__launch_bounds__|__maxnreg__|__cluster_dims__)\s*\([^)]*\)|extern\s+\"[^\"]*\"|"
                   r"(?:static|inline|__inline__|__forceinline__|__noinline__|__device__|__host__|void)\b)\s*")
_IDENT = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")
_PARAM = re.compile(r"^(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*\w*\s*\])?\s*$", re.S)


def find_kernels(src: str) -> list[KernelDecl]:
    """Return the ``__global__`` functions of ``src`` (regex-level parse, good for ordinary kernel code)."""
    masked = mask_comments_and_strings(src)
    found: list[KernelDecl] = []
    for m in _GLOBAL.finditer(masked):
        i = m.end()
        while True:
            sm = _SKIP.match(masked, i)
            if not sm or sm.end() == i:
                break
            i = sm.end()
        im = _IDENT.match(masked, i)
        if not im:
            continue
        name = im.group(1)
        lp = im.end() - 1
        rp = _match_paren(masked, lp)
        # template?  look back from __global__ to the previous ; } or start
        k = m.start()
        back = masked[max(0, k - 2000):k]
        cut = max(back.rfind(";"), back.rfind("}"), back.rfind("{"))
        head = back[cut + 1:]
        is_template = re.search(r"\btemplate\s*<", head) is not None
        after = masked[rp + 1:rp + 200].lstrip()
        params = []
        for s, e in _split_params(masked, lp + 1, rp):
            txt = masked[s:e].strip()
            if txt in ("", "void"):
                continue
            txt = txt.split("=")[0].strip()
            pm = _PARAM.match(txt)
            if pm:
                params.append(Param(" ".join(pm.group("type").split()), pm.group("name"), (s, e)))
            else:
                params.append(Param(" ".join(txt.split()), f"#{len(params)}", (s, e)))
        found.append(KernelDecl(name, is_template, masked.count("\n", 0, m.start()) + 1, params,
                                is_definition=after.startswith("{")))
    return found


_EXTERN_SHARED = re.compile(
    r"\bextern\s+(?P<q1>(?:volatile\s+)?)__shared__\s+(?P<align>(?:(?:__align__|alignas)\s*\(\s*\w+\s*\)\s*)?)"
    r"(?P<type>[A-Za-z_][\w:\s<>,*]*?)\s+(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*(?:volatile|__volatile__|goto))*\s*(?=\()")
_RCAST = re.compile(r"\breinterpret_cast\s*<")


def has_inline_asm(src: str) -> bool:
    """Return whether ``src`` contains inline assembly (PTX) outside comments."""
    return _ASM.search(mask_comments_and_strings(src)) is not None


def _brace_depth(masked: str, pos: int) -> int:
    return masked.count("{", 0, pos) - masked.count("}", 0, pos)


def rewrite_for_cpu(src: str, display_name: str, checked: bool) -> str:
    """Return ``src`` rewritten for the CPU engine; every original line keeps its line number.

    * ``asm(...)`` becomes a call that traps with a clear "GPU-only" error if it is ever executed;
    * ``extern __shared__ T name[];`` becomes a pointer to the launch's dynamic shared memory;
    * in checked builds, the pointer parameters of kernels become bounds-checked ``wb::gptr<T>`` and
      ``reinterpret_cast`` becomes ``wb::rcast`` (which keeps the bounds).
    """
    masked = mask_comments_and_strings(src)
    edits: list[tuple[int, int, str]] = []
    for m in _ASM.finditer(masked):
        edits.append((m.start(), m.end(), "WB_ASM"))
    for m in _EXTERN_SHARED.finditer(masked):
        typ = " ".join(m.group("type").split())
        name = m.group("name")
        q = m.group("q1").strip()
        ptr_t = f"{q + ' ' if q else ''}{typ}"
        if _brace_depth(masked, m.start()) > 0:
            new = f"{ptr_t}* const {name} __attribute__((unused)) = reinterpret_cast<{ptr_t}*>(wb_self()->dyn_smem);"
        else:
            line = masked.count("\n", 0, m.start()) + 1
            new = (f"\n#undef {name}\n#define {name} (reinterpret_cast<{ptr_t}*>(wb_self()->dyn_smem))\n"
                   f'#line {line} "{_escape(display_name)}"\n')
        nl = masked.count("\n", m.start(), m.end())
        edits.append((m.start(), m.end(), new + "\n" * nl))
    if checked:
        for m in _RCAST.finditer(masked):
            edits.append((m.start(), m.end(), "::wb::rcast<"))
        for k in find_kernels(src):
            for p in k.params:
                new = _checked_param(src[p.span[0]:p.span[1]])
                if new is not None:
                    edits.append((p.span[0], p.span[1], new))
    edits.sort(key=lambda e: e[0], reverse=True)
    out = src
    for s, e, new in edits:
        out = out[:s] + new + out[e:]
    return out


_PTR_PARAM = re.compile(
    r"^(?P<lead>\s*)(?P<base>[A-Za-z_][\w:\s<>,]*?)\s*\*\s*(?P<quals>(?:(?:__restrict__|__restrict|const)\s*)*)"
    r"(?P<name>[A-Za-z_]\w*)(?P<trail>\s*)$", re.S)


def _checked_param(text: str) -> str | None:
    """Return the checked-pointer spelling of one parameter, or None if it is not a plain ``T*``."""
    body = text.split("=")[0]
    m = _PTR_PARAM.match(body)
    if not m or "(" in body:
        return None
    base = " ".join(m.group("base").replace("__restrict__", "").split())
    nl = body.count("\n")
    return f"{m.group('lead')}::wb::gptr<{base}> {m.group('name')}" + "\n" * nl


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def line_directive(display_name: str, line: int = 1) -> str:
    """Return a ``#line`` directive naming ``display_name``."""
    return f'#line {line} "{_escape(display_name)}"\n'
