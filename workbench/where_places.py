"""Find everything about one op by its name: ``wb.where("softmax")``.

It lists the op's contract file, its variants with their files, the CUDA C sources they compile (and the local
headers those include), the known-wrong kernels, the exercises, the drills, the tests and benchmarks that name the
op, recorded GPU results, and the notebook sections that teach it, as anchored links. Everything but the notebook
map is read from the registry and the tree when asked, so renamed files show up as they are.

The result renders as a table of links in Jupyter and as plain text in a terminal
(``python -m workbench where softmax``).
"""

from __future__ import annotations

import html
import inspect as _inspect
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from workbench import registry
from workbench.cuda.toolchain import local_includes

__all__ = ["KINDS", "NOTEBOOKS", "Place", "Where", "heading_anchor", "notebook_headings", "where"]

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"

#: The sections of a listing, in order, with their titles.
KINDS: dict[str, str] = {
    "contract": "contract (inputs, float64 reference, FLOP and byte formulas)",
    "variant": "variants, in teaching order",
    "cuda_c": "CUDA C sources",
    "known_wrong": "known-wrong kernels (and the diagnosis the checker must give)",
    "exercise": "exercises (starter; solution; declaration)",
    "drill": "interview drills",
    "test": "tests",
    "benchmark": "benchmarks and recorded GPU results",
    "notebook": "notebook sections",
}

#: Where each op is taught: notebook -> {op: words its headings use for it}. The first op of a notebook is the
#: chapter's own: every top-level section of that notebook is listed for it. Another op gets the headings of its
#: notebook that use one of its words or name one of its exercises. Headings of any notebook that use an op's own
#: name (``softmax``, ``moe_fp8``) are listed too; an op no notebook teaches yet is simply not in this map.
NOTEBOOKS: dict[str, dict[str, tuple[str, ...]]] = {
    "00-workbench-tour": {"vecadd": ("vector add",), "transpose": ("transpose",)},
    "01-gemm": {"gemm": ("gemm",), "gemm_fp8": ("fp8",), "gemm_fp8_block": ("block-scaled", "block scales", "fp8")},
    "02-softmax": {"softmax": ("softmax",), "rmsnorm": ("rmsnorm",)},
    "03-flash-attention": {"attention": ("attention",), "attention_bwd": ("backward",)},
    "04-fused-moe": {"moe": ("moe", "mixture-of-experts", "expert"), "moe_topk": ("routing", "top-k"),
                     "moe_align": ("align block size",), "moe_fp8": ("fp8",)},
    "06-decode-attention": {"decode_attention": ("decode attention", "decode"),
                            "lse_merge": ("log-sum-exp merge", "lse merge"),
                            "decode_attention_q8": ("quantized cache", "quantized")},
    "07-norms-and-numerics": {"layernorm": ("layernorm", "welford"), "layernorm_bwd": ("backward",),
                              "add_rmsnorm": ("add+rmsnorm", "fusion"), "rope": ("rope",),
                              "gemm_w8a8": ("int8", "quantization"), "gemm_mxfp4": ("mxfp4",)},
    "08-communication": {"all_reduce": ("all-reduce", "collectives", "busbw"), "reduce_scatter": ("collectives",),
                         "all_gather": ("collectives",), "all_to_all": ("collectives",),
                         "tp_mlp": ("tensor parallelism",),
                         "ring_attention": ("ring attention", "context parallelism")},
    "09-cute-layouts": {},  # no op of its own (layouts serve every GEMM); wb.where("gemm") finds its GEMM section
}


@dataclass(frozen=True)
class Place:
    """One thing about an op: what it is, its name, its file (and line or heading anchor), and a short note."""

    kind: str  # a key of KINDS
    name: str
    path: Path
    line: int | None = None
    anchor: str = ""  # a notebook heading's anchor (JupyterLab's: the heading text, spaces as '-')
    note: str = ""
    also: tuple[Path, ...] = ()  # more files of the same thing (an exercise's solution)

    @property
    def rel(self) -> str:
        """Return the path relative to the repository root ('kernels/softmax/v5_cuda_warp.py')."""
        return _rel(self.path)

    @property
    def location(self) -> str:
        """Return 'path', 'path:line' or 'path#anchor'."""
        if self.anchor:
            return f"{self.rel}#{self.anchor}"
        return f"{self.rel}:{self.line}" if self.line else self.rel

    def href(self, base: Path = NOTEBOOK_DIR, path: Path | None = None) -> str:
        """Return a link to the file (relative to ``base``: notebooks link from notebooks/), with its anchor."""
        rel = os.path.relpath(path or self.path, base).replace(os.sep, "/")
        return quote(rel) + (f"#{quote(self.anchor, safe='')}" if self.anchor and path is None else "")


def _rel(p: Path) -> str:
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(p)


_LEFT = " style='text-align:left'"  # JupyterLab right-aligns table cells; names, paths and notes read left to right


class Where(list):
    """The places of one op (a list of :class:`Place`), shown grouped by kind: HTML links in Jupyter, text else."""

    def __init__(self, op: str, places: list[Place], doc: str = "") -> None:
        super().__init__(places)
        self.op, self.doc = op, doc

    def of(self, kind: str) -> list[Place]:
        """Return the places of one kind ('variant', 'exercise', ...)."""
        if kind not in KINDS:
            raise ValueError(f"where({self.op!r}).of: unknown kind {kind!r}; kinds are {list(KINDS)}")
        return [p for p in self if p.kind == kind]

    def paths(self) -> list[Path]:
        """Return every file listed, once each, in order."""
        return list(dict.fromkeys(q for p in self for q in (p.path, *p.also)))

    def _groups(self) -> Iterator[tuple[str, list[Place]]]:
        for kind, title in KINDS.items():
            rows = self.of(kind)
            if rows:
                yield title, rows

    def __str__(self) -> str:
        lines = [f"{self.op}: {self.doc}" if self.doc else self.op]
        for title, rows in self._groups():
            lines.append(f"\n{title} ({len(rows)})")
            width = max(len(p.name) for p in rows)
            for p in rows:
                extra = "".join(f"; {_rel(a)}" for a in p.also)
                note = f"  {p.note}" if p.note else ""
                lines.append(f"  {p.name:<{width}}  {p.location}{extra}{note}" if p.name != p.rel
                             else f"  {p.location}{extra}{note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_html(self, base: Path = NOTEBOOK_DIR) -> str:
        """Return the listing as HTML, each file a link relative to ``base`` (a notebook's folder)."""
        esc = html.escape
        parts = [f"<div><b>{esc(self.op)}</b>{': ' + esc(self.doc) if self.doc else ''}"]
        for title, rows in self._groups():
            parts.append(f"<p style='margin:0.6em 0 0.2em'><i>{esc(title)}</i> ({len(rows)})</p><table>")
            for p in rows:
                links = [f"<a href='{esc(p.href(base))}'>{esc(p.location)}</a>"]
                links += [f"<a href='{esc(p.href(base, a))}'>{esc(_rel(a))}</a>" for a in p.also]
                parts.append(f"<tr><td{_LEFT}><code>{esc(p.name)}</code></td><td{_LEFT}>{'; '.join(links)}</td>"
                             f"<td{_LEFT}>{esc(p.note)}</td></tr>")
            parts.append("</table>")
        parts.append("</div>")
        return "".join(parts)


# ------------------------------------------------------------------------------------------------ finding
def where(op: str) -> Where:
    """Return everything about ``op`` by kind: contract, variants, CUDA C, known-wrong kernels, exercises, drills,
    tests, benchmarks and notebook sections (a :class:`Where`: links in Jupyter, text in a terminal)."""
    spec = registry.get_op(op, with_variants=True)
    contract = _contract(spec)
    vs = registry.variants(op, include_wrong=True)
    places = [contract, *(_variant(v) for v in vs if not v.known_wrong)]
    places += _cuda_sources(vs, contract.path.parent)
    places += [_variant(v) for v in vs if v.known_wrong]
    places += _exercises(op) + _drills(op) + _tests(op) + _benchmarks(op) + _notebook_sections(op)
    return Where(op, places, spec.doc.strip().splitlines()[0] if spec.doc.strip() else "")


def _source_line(obj: object) -> tuple[Path, int | None]:
    fn = _inspect.unwrap(obj)  # type: ignore[arg-type]
    path = Path(_inspect.getsourcefile(fn) or "")
    try:
        return path, _inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return path, None


def _contract(spec: registry.Op) -> Place:
    path, line = _source_line(spec.reference)
    return Place("contract", spec.name, path, line, note=spec.signature)


def _variant(v: registry.Variant) -> Place:
    path, line = _source_line(v.fn)
    if v.source and v.source.is_file() and path != v.source:
        path, line = v.source, None
    if v.known_wrong:
        return Place("known_wrong", v.name, path, line, note=f"[{v.backend}] -> {v.expected_diagnosis}: {v.idea}")
    gpu = ", GPU only" if v.gpu_only else ""
    return Place("variant", v.name, path, line, note=f"[{v.backend}{gpu}] {v.idea}")


def _cuda_sources(vs: list[registry.Variant], folder: Path) -> list[Place]:
    """Return the .cu files the variants compile, the op folder's other .cu/.cuh files, and local headers they
    include (a shared header outside the folder too)."""
    users: dict[Path, list[str]] = {}
    for v in vs:
        if v.cu_file is not None:
            users.setdefault(v.cu_file.resolve(), []).append(v.name)
    files = list(users) + sorted(p.resolve() for ext in ("*.cu", "*.cuh") for p in folder.rglob(ext))
    seen = dict.fromkeys(f for f in files if f.is_file())
    for f in list(seen):  # then the headers they include, wherever they live (followed through their includes)
        for header in local_includes(f.read_text(errors="replace"), f.parent):
            seen.setdefault(header, None)
    out = []
    for f in seen:
        note = "compiled by " + ", ".join(users[f]) if f in users else (
            "header" if f.suffix in (".cuh", ".h") else "not compiled by a registered variant")
        out.append(Place("cuda_c", f.name, f, note=note))
    return out


def _exercises(op: str) -> list[Place]:
    from workbench.practice import exercises as ex

    out = []
    for eid in ex.exercises():
        e = ex.exercise(eid)
        if e.op == op:
            also = (e.solution_file,) + ((e.source,) if e.source else ())  # and where it is declared
            out.append(Place("exercise", e.id, e.starter_file, also=also, note=e.title))
    return out


def _drills(op: str) -> list[Place]:
    from workbench.practice import catalogue

    out = []
    for d in catalogue().values():
        if d.op == op:
            path = Path(d.source)
            out.append(Place("drill", d.id, path, _line_of(path, f'id = "{d.id}"'),
                             note=f"{d.kind.replace('_', '-')} · {d.level}: {d.title}"))
    return out


def _line_of(path: Path, text: str) -> int | None:
    try:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if text in line:
                return i
    except OSError:
        pass
    return None


def _names_op(path: Path, op: str) -> bool:
    """Return True when a Python file is named after ``op`` (test_softmax.py) or names it as a quoted string."""
    if path.stem in (op, f"test_{op}"):
        return True
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return re.search(rf"""["']{re.escape(op)}["']""", text) is not None


def _tests(op: str) -> list[Place]:
    return [Place("test", p.name, p) for p in sorted((ROOT / "tests").rglob("test_*.py")) if _names_op(p, op)]


def _benchmarks(op: str) -> list[Place]:
    from workbench import results

    out = [Place("benchmark", f"python -m workbench bench --op {op}", ROOT / "workbench" / "__main__.py",
                 note="checks every variant that runs here, then times the ones that run natively")]
    out += [Place("benchmark", p.name, p) for p in sorted((ROOT / "benchmarks").glob("*.py")) if _names_op(p, op)]
    out += [Place("benchmark", row["file"], results.RESULTS_DIR / row["file"],
                  note=f"recorded on {row['gpu']}, {row['date']}") for row in results.recorded_summary()
            if op in row.get("ops", ())]
    return out


# ------------------------------------------------------------------------------------------------ notebooks
def heading_anchor(text: str) -> str:
    """Return JupyterLab's anchor of a markdown heading: its rendered text with spaces as '-'."""
    return text.strip().replace(" ", "-")


def _rendered(md: str) -> str:
    """Return a heading's text as rendered: no code backticks, emphasis marks, link targets or HTML tags."""
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", md)
    s = re.sub(r"<[^>]+>", "", s)
    s = s.replace("`", "")
    s = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", s)
    return s.strip().rstrip("#").strip()


def notebook_headings(path: Path) -> list[tuple[int, str]]:
    """Return (level, rendered text) of every markdown heading of a notebook, in order (code fences skipped)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        fenced = False
        for line in src.splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            m = None if fenced else re.match(r"^(#{1,6})\s+(.+)$", line)
            if m:
                out.append((len(m.group(1)), _rendered(m.group(2))))
    return out


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(re.search(rf"(?<![a-z0-9_]){re.escape(w.lower())}(?![a-z0-9_])", low) for w in words)


def _notebook_sections(op: str) -> list[Place]:
    home = next(((nb, ops) for nb, ops in NOTEBOOKS.items() if op in ops), None)
    ex_ids = tuple(p.name for p in _exercises(op))
    out: list[Place] = []
    for path in sorted(NOTEBOOK_DIR.glob("*.ipynb")):
        own = home is not None and path.stem == home[0]
        main = own and next(iter(home[1])) == op
        words = (*home[1][op], *ex_ids) if own else (op,)
        for level, text in notebook_headings(path):
            if (main and level <= 2) or _mentions(text, words) or _mentions(text, (op,)):
                out.append(Place("notebook", text, path, anchor=heading_anchor(text), note=path.stem))
    return out
