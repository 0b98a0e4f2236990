"""What ``wb.show_source`` and ``wb.diff`` show: one rung's own code, not the files it lives in.

A rung (a registered variant) is its launcher (the registered Python function), the kernels it launches and the
helpers they call. For a Python backend (numba, triton, cupy) these are the module-level definitions the launcher
reaches by name in its own file, plus kernels it imports from other files under ``kernels/``. For CUDA C the
kernel is picked out of the variant's ``.cu`` file by the names the launcher passes as strings (``"softmax_block"``
finds ``softmax_block`` and its ``softmax_block_f32/_f16/_bf16`` instances); the ``__device__`` helpers it calls
come from the ``.cu`` file itself or from the headers it includes (``kernels/include/*.cuh``), so a lesson that
lives in a helper (the barriers of a block reduction) is shown with the rung.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.registry import Variant

_KERNELS_ROOT = Path(__file__).resolve().parent.parent / "kernels"


@dataclass
class Part:
    """One shown piece of a rung: a definition (or the file's opening comment) with where it comes from."""

    title: str  # e.g. "softmax_block.cu: softmax_block"
    lang: str  # "python" or "cuda"
    text: str
    path: Path
    line: int  # first line of ``text`` in ``path`` (1-based)
    helper: bool = False  # a helper from another file (a header): shown folded


@dataclass
class Rung:
    """The parts of one variant's code, in reading order: launcher and kernels, then helpers from headers."""

    variant: Variant
    parts: list[Part] = field(default_factory=list)

    def text(self, helpers: bool = True, lines: bool = True) -> str:
        """Return the rung's code as one text; ``lines``: each part headed by a comment naming its file and line."""
        out = []
        for p in self.parts:
            if p.helper and not helpers:
                continue
            mark = "#" if p.lang == "python" else "//"
            head = f"{mark} {_rel(p.path)}:{p.line}\n" if lines else ""
            out.append(f"{head}{p.text.rstrip()}\n")
        return "\n".join(out)

    def markdown(self) -> str:
        """Return the rung as Markdown: its own parts as code blocks, helpers from headers in a folded section."""
        own = [p for p in self.parts if not p.helper]
        helpers = [p for p in self.parts if p.helper]
        md = [f"`{_rel(p.path)}:{p.line}`\n```{p.lang}\n{p.text.rstrip()}\n```" for p in own]
        if helpers:
            names = ", ".join(p.title.split(": ")[-1] for p in helpers)
            body = "\n\n".join(f"`{_rel(p.path)}:{p.line}`\n```{p.lang}\n{p.text.rstrip()}\n```" for p in helpers)
            md.append(f"<details><summary>helpers it calls from headers: {names}</summary>\n\n{body}\n\n</details>")
        return "\n\n".join(md)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(_KERNELS_ROOT.parent))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------------- Python
def _unwrap(obj: Any) -> Any:
    """Return the Python function behind a jit object (numba Dispatcher/FakeCUDAKernel, triton JIT/Autotuner)."""
    for _ in range(5):
        if inspect.isfunction(obj):
            return obj
        inner = getattr(obj, "py_func", None) or getattr(obj, "fn", None)
        if inner is None:
            return None
        obj = inner
    return None


def _module_defs(tree: ast.Module) -> dict[str, ast.stmt]:
    """Map each module-level name to the statement that defines it (functions, classes, simple assignments)."""
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs.setdefault(n.id, node)
    return defs


def _names(node: ast.AST) -> list[str]:
    """Return the names ``node`` uses, in order, leaving out its decorators (registry metadata, not the rung)."""
    skip = {id(n) for d in getattr(node, "decorator_list", []) for n in ast.walk(d)}
    return list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in skip))


def _segment(lines: list[str], node: ast.stmt) -> tuple[int, str]:
    """Return (first line, text) of a statement with its decorators and the comment lines right above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while start > 1 and lines[start - 2].lstrip().startswith("#") and not set(lines[start - 2].strip()) <= set("#-"):
        start -= 1
    return start, "\n".join(lines[start - 1:node.end_lineno])


def _python_parts(fn: Any, seen: set[tuple[Path, str]]) -> list[Part]:
    """Return the definitions ``fn`` reaches by name in its own file (transitively), in file order, then kernels
    it reaches in other files under kernels/."""
    path = Path(inspect.getsourcefile(fn) or "").resolve()
    text = path.read_text()
    lines = text.splitlines()
    defs = _module_defs(ast.parse(text))
    wanted: dict[int, ast.stmt] = {}
    foreign: list[Any] = []
    todo = [fn.__name__]
    while todo:
        name = todo.pop()
        if (path, name) in seen:
            continue
        seen.add((path, name))
        node = defs.get(name)
        if node is not None:
            wanted[id(node)] = node
            todo += _names(node)
            continue
        glob = getattr(fn, "__globals__", {}).get(name)
        obj = None if inspect.isfunction(glob) else _unwrap(glob)  # a jit kernel, not a plain helper
        if obj is not None and _is_kernel_file(obj):
            foreign.append(obj)
    parts = []
    for node in sorted(wanted.values(), key=lambda n: n.lineno):
        line, seg = _segment(lines, node)
        title = node.name if hasattr(node, "name") else _names(node)[0]
        parts.append(Part(f"{path.name}: {title}", "python", seg, path, line))
    for obj in foreign:
        parts += _python_parts(obj, seen)
    return parts


def _is_kernel_file(obj: Any) -> bool:
    try:
        src = Path(inspect.getsourcefile(obj) or "").resolve()
    except TypeError:
        return False
    return _KERNELS_ROOT in src.parents and not src.name.startswith("_")


# ------------------------------------------------------------------------------------------------- CUDA C
@dataclass
class CDef:
    """One top-level C/C++ definition: a function (or struct) with its body."""

    name: str
    text: str
    line: int
    path: Path


_NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>;{}()]*>)?\s*\(")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*?>)?\s*\(")
_STRUCT = re.compile(r"\b(?:struct|class|union)\s+(?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)?"
                     r"([A-Za-z_]\w*)")
_C_KEYWORDS = frozenset("if for while switch return sizeof do else case static_cast reinterpret_cast const_cast "
                        "__launch_bounds__ __align__ alignas decltype defined".split())


def _mask_comments_and_strings(src: str) -> str:
    """Return ``src`` with comments, string and char literals blanked (same length, newlines kept)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, src, flags=re.S)


def _leading_comment(lines: list[str], start: int) -> int:
    """Return the first line (0-based) of the // comment block that ends right above line ``start``."""
    while start > 0 and lines[start - 1].lstrip().startswith("//"):
        start -= 1
    return start


def c_definitions(path: Path) -> list[CDef]:
    """Return the top-level definitions with a body in a C/C++ file, each with the comment right above it."""
    src = path.read_text(errors="replace")
    masked = _mask_comments_and_strings(src)
    lines = src.splitlines()
    defs: list[CDef] = []
    depth, stmt_start, i = 0, 0, 0
    while i < len(masked):
        ch = masked[i]
        if ch == "#" and depth == 0 and (i == 0 or masked[i - 1] == "\n"):  # a preprocessor line (continued by \\)
            m = re.compile(r"(?:[^\n]*\\\n)*[^\n]*").match(masked, i)
            i = m.end()
            stmt_start = i + 1
        elif ch == ";" and depth == 0:
            stmt_start = i + 1
        elif ch == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = i + 1
                if masked[end:].lstrip().startswith(";"):  # struct ...{...};
                    end = masked.index(";", end) + 1
                head = masked[stmt_start:open_at]
                d = _make_def(path, src, lines, head, stmt_start, end)
                if d is not None:
                    defs.append(d)
                stmt_start, i = end, end - 1
        i += 1
    return defs


def _make_def(path: Path, src: str, lines: list[str], head: str, start: int, end: int) -> CDef | None:
    if re.search(r"\bnamespace\b|\bextern\s*\"C\"\s*$", head) and "(" not in head:
        return None
    names = [n for n in _NAME_BEFORE_PAREN.findall(head) if n not in _C_KEYWORDS]
    m = _STRUCT.search(head) if not names else None
    name = names[0] if names else (m.group(1) if m else None)
    if name is None:
        return None
    lead = len(src[start:]) - len(src[start:].lstrip())
    first = src.count("\n", 0, start + lead)
    first = _leading_comment(lines, first)
    last = src.count("\n", 0, end)
    return CDef(name, "\n".join(lines[first:last + 1]), first + 1, path)


def _preamble(path: Path, defs: list[CDef]) -> Part | None:
    """Return the lines of ``path`` before its first definition: the opening comment, includes and macros."""
    lines = path.read_text(errors="replace").splitlines()
    n = (min(d.line for d in defs) - 1) if defs else len(lines)
    text = "\n".join(lines[:n]).rstrip()
    return Part(f"{path.name}: preamble", "cuda", text, path, 1) if text else None


def _pick_kernels(own: list[CDef], strings: list[list[str]]) -> list[CDef]:
    """Return the definitions named by the first group of ``strings`` that names any (exactly, else as a prefix of
    ``name_f32``-style instances); the whole file when none does."""
    for group in strings:
        exact = [d for d in own if d.name in group]
        if exact:
            return exact + [d for d in own if d not in exact and any(d.name.startswith(s + "_") for s in group
                                                                      if s in {e.name for e in exact})]
        prefixed = [d for d in own if any(d.name.startswith(s + "_") for s in group)]
        if prefixed:
            return prefixed
    return list(own)


def _cuda_parts(cu: Path, launcher_strings: list[list[str]]) -> list[Part]:
    """Return the kernels of ``cu`` the launcher names, the definitions they call there and in its headers."""
    from workbench.cuda.toolchain import local_includes

    own = c_definitions(cu)
    headers = [d for h in local_includes(cu.read_text(errors="replace"), cu.parent)
               for d in c_definitions(h) + c_macros(h)]
    picked = _pick_kernels(own, launcher_strings)
    tail = _epilogue(cu, own)
    if tail is not None and not any(re.search(rf"\b{re.escape(d.name)}\b", tail.text) for d in picked):
        tail = None  # the file's exports are of other kernels
    by_name: dict[str, list[CDef]] = {}
    for d in own + headers:
        by_name.setdefault(d.name, []).append(d)
    seeds = picked + ([CDef("", tail.text, tail.line, cu)] if tail else [])
    chosen = _called_closure(seeds, by_name)
    parts = [p for p in [_preamble(cu, own)] if p is not None]
    for d in sorted(chosen.values(), key=lambda d: (d.path != cu, str(d.path), d.line)):
        if d.name:
            parts.append(Part(f"{d.path.name}: {d.name}", "cuda", d.text, d.path, d.line, helper=d.path != cu))
    if tail is not None:
        parts.insert(len([p for p in parts if not p.helper]), tail)  # the exports, before the header helpers
    return parts


def _called_closure(seeds: list[CDef], by_name: dict[str, list[CDef]]) -> dict[int, CDef]:
    """Return ``seeds`` and every definition they call (or name), transitively, keyed by id."""
    chosen = {id(d): d for d in seeds}
    todo = list(seeds)
    while todo:
        d = todo.pop()
        body = _mask_comments_and_strings(d.text)
        called = set(_CALL.findall(body)) | {w for w in re.findall(r"\b[A-Za-z_]\w*\b", body) if w in by_name}
        for name in called - {d.name}:
            for dd in by_name.get(name, ()):
                if id(dd) not in chosen:
                    chosen[id(dd)] = dd
                    todo.append(dd)
    return chosen


_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\((?:[^\n]*\\\n)*[^\n]*", re.M)


def c_macros(path: Path) -> list[CDef]:
    """Return the function-like ``#define NAME(...)`` macros of a header, each with the comment right above it.

    The workbench's own export plumbing (``WB_*``) is left out.
    """
    src = path.read_text(errors="replace")
    lines = src.splitlines()
    out = []
    for m in _MACRO.finditer(src):
        if m.group(1).startswith("WB_"):
            continue  # the workbench's dtype-export plumbing (WB_EACH_DTYPE, WB_F32, ...), not a lesson
        first = _leading_comment(lines, src.count("\n", 0, m.start()))
        last = src.count("\n", 0, m.end())
        out.append(CDef(m.group(1), "\n".join(lines[first:last + 1]), first + 1, path))
    return out


def _epilogue(path: Path, defs: list[CDef]) -> Part | None:
    """Return the lines after the last definition of ``path`` (macros exporting the kernels as extern "C")."""
    if not defs:
        return None
    lines = path.read_text(errors="replace").splitlines()
    last = defs[-1]
    start = last.line - 1 + last.text.count("\n") + 1
    text = "\n".join(lines[start:]).strip("\n")
    return Part(f"{path.name}: exports", "cuda", text, path, start + 1) if text.strip() else None


def _string_constants(fn: Any) -> list[list[str]]:
    """Return the identifier-like strings of ``fn``'s body, then those of its decorators (kernel names it passes)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, SyntaxError, TypeError):
        return []
    node = tree.body[0]
    decos = [d for d in getattr(node, "decorator_list", [])]
    in_deco = {id(n) for d in decos for n in ast.walk(d)}

    def strings(nodes: list[ast.AST]) -> list[str]:
        return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and re.fullmatch(r"[A-Za-z_]\w*", n.value)]
    body = strings([n for n in ast.walk(node) if id(n) not in in_deco])
    return [body, strings([n for d in decos for n in ast.walk(d)])]


# ------------------------------------------------------------------------------------------------- API
def rung(v: Variant) -> Rung:
    """Return variant ``v``'s own code: launcher, kernels and the helpers they call (see the module docstring)."""
    r = Rung(v)
    fn = v.fn
    if v.source is not None and inspect.isfunction(fn):
        try:
            r.parts += _python_parts(fn, set()) or [_function_part(fn)]
        except (OSError, SyntaxError, TypeError):
            r.parts.append(Part(v.source.name, "python", v.source.read_text(), v.source, 1))
    if v.cu_file is not None:
        r.parts += _cuda_parts(Path(v.cu_file), _string_constants(fn))
    r.parts = _merge_adjacent(r.parts)
    return r


def _function_part(fn: Any) -> Part:
    """Return ``fn``'s own source (a function made by a factory, not found by name in its module)."""
    lines, first = inspect.getsourcelines(fn)
    path = Path(inspect.getsourcefile(fn) or "")
    return Part(f"{path.name}: {fn.__name__}", "python", "".join(lines), path, first)


def _merge_adjacent(parts: list[Part]) -> list[Part]:
    """Join parts of one file that follow each other (one-line helpers in a row) into one part."""
    out: list[Part] = []
    files: dict[Path, list[str]] = {}
    for p in parts:
        q = out[-1] if out else None
        if q is not None and q.path == p.path and q.helper == p.helper and q.lang == p.lang:
            gap = p.line - (q.line + q.text.count("\n") + 1)
            if q.path not in files:
                files[q.path] = q.path.read_text(errors="replace").splitlines()
            lines = files[q.path]
            if 0 <= gap <= 1 and all(not ln.strip() for ln in lines[p.line - 1 - gap:p.line - 1]):
                names = q.title.split(": ", 1)[-1] + ", " + p.title.split(": ", 1)[-1]
                q.text = q.text.rstrip("\n") + "\n" * (gap + 1) + p.text
                q.title = f"{p.path.name}: {names}"
                continue
        out.append(Part(p.title, p.lang, p.text, p.path, p.line, p.helper))
    return out


def full_source(v: Variant, cu: bool = True) -> list[Part]:
    """Return the whole files of ``v``: its Python file and (``cu``) its .cu file."""
    parts = [Part(v.source.name, "python", v.source.read_text(), v.source, 1)] if v.source else []
    if cu and v.cu_file is not None:
        parts.append(Part(Path(v.cu_file).name, "cuda", Path(v.cu_file).read_text(), Path(v.cu_file), 1))
    return parts


def diff_text(a: Variant, b: Variant, context: int = 3) -> str:
    """Return the unified diff of rung ``a``'s code to rung ``b``'s (kernels and helpers, not whole files)."""
    ta = rung(a).text(lines=False).splitlines()
    tb = rung(b).text(lines=False).splitlines()
    return "\n".join(difflib.unified_diff(ta, tb, f"{a.op}/{a.name}", f"{b.op}/{b.name}", n=context,
                                          lineterm=""))
