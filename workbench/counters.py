"""Compare a ladder's variants by their exact emulated counters: ``wb.counters_table(op, variants, *inputs)``.

Each variant runs once on the same small problem under :func:`workbench.profile`, and the table shows, row by
row, what decides its memory cost:

- **sectors per request** (loads and stores): 32-byte sectors a warp's global access touches; 4 for 32 consecutive
  floats, 16 for 32 consecutive float4s, 32 when every lane is in its own sector (no coalescing);
- **load efficiency**: bytes the lanes asked for / bytes in the sectors touched (1.0: nothing wasted);
- **bank conflicts**: shared-memory wavefronts beyond one per request (32-bank model);
- **global bytes**: what the loads and stores move (32 x sectors for CUDA C, bytes of unmasked lanes for Triton);
- **traffic amplification**: global bytes / the op's compulsory bytes (``op.bytes``: inputs read once, output written
  once). 1.0 is the floor a perfectly fused, perfectly coalesced kernel reaches with no cache at all.

The counts are L1-level: every request's sectors count, as if no cache kept anything between requests. A real GPU's
L1 and L2 absorb part of a high amplification (a tiled GEMM's re-reads mostly hit L2), so the amplification is what
the kernel *asks* the memory system for, not what reaches HBM.

>>> import workbench as wb
>>> t = wb.counters_table("vecadd", ["cuda_grid", "triton_block"], N=4096)
>>> t                                  # a table in a notebook, text in a terminal
>>> t["cuda_grid"].amplification       # 1.0
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CountersRow", "CountersTable", "counters_table"]

_SECT_LD = "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"
_SECT_ST = "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"
_EFF_LD = "wb__global_load_efficiency.ratio"
_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
_SHARED_REQ = ("smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum")
_BYTES = "wb__global_bytes.sum"

_NOTE = ("Exact counts of one emulated run. CUDA C: L1-level requests and 32-byte sectors (every request's sectors "
         "count, none is assumed cached), shared wavefronts of the 32-bank model. Triton: bytes its unmasked lanes "
         "request (Triton coalesces itself, so no sectors). Not modelled: L1/L2 hits, DRAM, latency, issue rate.")


@dataclass
class CountersRow:
    """One variant's line: its counters (None where its backend does not count them) and the Profile behind them."""

    label: str
    backends: str
    launches: int
    sectors_per_load: float | None
    sectors_per_store: float | None
    load_efficiency: float | None
    bank_conflicts: int | None
    global_bytes: float | None
    amplification: float | None
    profile: Any = None
    note: str = ""

    @property
    def counted(self) -> bool:
        """True when every launch of the call was counted (the bytes are then the call's whole global traffic)."""
        return self.global_bytes is not None and not self.note


def _row(label: str, prof: Any, compulsory: float) -> CountersRow:
    """Summarise one Profile as a table row."""
    m = prof.metrics
    backends = ", ".join(sorted({r.backend for r in prof.launches})) or "-"
    note = "; ".join(prof.notes)
    if not prof.launches:
        note = "no emulated launch: torch/numpy operations are not counted"
    shared = any(m.get(k) for k in _SHARED_REQ)
    has_cuda = any(r.backend == "cuda" for r in prof.launches)
    gbytes = m.get(_BYTES) if prof.launches else None
    amp = gbytes / compulsory if gbytes is not None and compulsory > 0 else None
    return CountersRow(
        label=label, backends=backends, launches=len(prof.launches),
        sectors_per_load=m.get(_SECT_LD), sectors_per_store=m.get(_SECT_ST), load_efficiency=m.get(_EFF_LD),
        bank_conflicts=int(m.get(_CONFLICTS, 0)) if (shared or has_cuda) else None,
        global_bytes=gbytes, amplification=amp, profile=prof, note=note)


def _entries(op: str, variants: Any) -> list[tuple[str, Callable[..., Any]]]:
    """Return (label, callable) for each variant given by name, Variant, callable, (label, fn) pair or dict."""
    from workbench.registry import Variant, variant

    if isinstance(variants, (str, Variant)) or callable(variants):
        variants = [variants]
    items: Iterable[Any] = variants.items() if isinstance(variants, Mapping) else variants
    out: list[tuple[str, Callable[..., Any]]] = []
    for item in items:
        label, fn = item if isinstance(item, tuple) else (None, item)
        if isinstance(fn, str):
            vop, _, name = fn.rpartition("/")
            fn = variant(vop or op, name)
        if isinstance(fn, Variant):
            if fn.op != op:
                raise ValueError(f"counters_table({op!r}): variant {fn.op}/{fn.name} belongs to op {fn.op!r}")
            label = label or fn.name
        elif callable(fn):
            label = label or getattr(fn, "__name__", None) or type(fn).__name__
        else:
            raise TypeError(f"counters_table({op!r}): expected variant names, Variants, functions or (label, "
                            f"function) pairs, got {type(fn).__name__} {fn!r}"[:200])
        out.append((str(label), fn))
    if not out:
        raise ValueError(f"counters_table({op!r}): no variants given")
    labels = [lb for lb, _ in out]
    dup = sorted({lb for lb in labels if labels.count(lb) > 1})
    if dup:
        raise ValueError(f"counters_table({op!r}): labels {dup} appear twice; give (label, fn) pairs")
    return out


def _problem(op: str, inputs: tuple, shape: dict[str, Any]) -> tuple[tuple, dict, dict, torch.dtype]:
    """Return (inputs, call keyword arguments, the op's shape, dtype) from given inputs or sizes."""
    from workbench.registry import get_op, make_inputs

    spec = get_op(op)
    dtype, seed = shape.pop("dtype", None), shape.pop("seed", 0)
    if inputs:
        extra = [k for k in shape if k not in spec.call_kwargs]
        if extra or dtype is not None:
            raise ValueError(f"counters_table({op!r}): pass either inputs or sizes, not both (got inputs and "
                             f"{extra + (['dtype'] if dtype is not None else [])})")
        kw = dict(shape)
    else:
        if not shape:
            raise ValueError(f"counters_table({op!r}): pass the inputs, or the sizes to make them "
                             f"({', '.join(f'{k}=...' for k in spec.shape_keys)})")
        sizes, kw = spec.split(shape)
        inputs = make_inputs(op, dtype=dtype, seed=seed, **sizes, **kw)
    dims = spec.validate(*inputs, **kw)
    dts = [t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    dt = spec.dtype_of(*inputs) if spec.dtype_of is not None else (dts[0] if dts else torch.float32)
    return tuple(inputs), kw, {k: dims[k] for k in spec.shape_keys if k in dims}, dt


def counters_table(op: str, variants: Any, *inputs: Any, compulsory_bytes: float | None = None,
                   **shape: Any) -> CountersTable:
    """Profile each variant of ``op`` once on the same problem; return the table of their memory counters.

    ``variants``: names (``"cuda_naive"``), Variants, functions called like a variant (a notebook's ``RawKernel``
    wrapper), ``(label, function)`` pairs or a ``{label: function}`` dict. Give the inputs, or the sizes to make them
    (``N=4096``, ``dtype="float16"``, ``seed=``; call options such as ``causal=True`` go to every call).
    ``compulsory_bytes`` defaults to ``op.bytes`` at the problem's shape and dtype.
    """
    from workbench.registry import get_op

    entries = _entries(op, variants)
    inputs, kw, dims, dt = _problem(op, inputs, dict(shape))
    need = float(compulsory_bytes) if compulsory_bytes is not None else float(get_op(op).bytes(dtype=dt, **dims))
    rows = [_measure(label, fn, inputs, kw, need) for label, fn in entries]
    return CountersTable(op, dims, dt, need, rows, kwargs=kw)


def _measure(label: str, fn: Callable[..., Any], inputs: tuple, kw: dict, need: float) -> CountersRow:
    """Profile one variant; a call that cannot run or be counted here (GPU-only, no ncu) is a row saying why."""
    from workbench.profile_counters import ProfileError, profile
    from workbench.registry import UnsupportedHere

    try:
        prof = profile(fn, *inputs, **kw)
    except ProfileError as e:
        return CountersRow(label, "-", 0, None, None, None, None, None, None, None, f"not counted: {e}")
    except UnsupportedHere as e:
        return CountersRow(label, "-", 0, None, None, None, None, None, None, None, f"not run here: {e}")
    return _row(label, prof, need)


def _num(v: float | None, fmt: str) -> str:
    if v is None:
        return "-"
    return format(v, fmt)


def _bytes(v: float | None) -> str:
    if v is None:
        return "not counted"
    return f"{int(v):,} B"


class CountersTable:
    """The rows of :func:`counters_table`; ``t["label"]`` is a :class:`CountersRow`; renders as HTML or text."""

    COLUMNS = ("variant", "backend", "sectors / load request", "sectors / store request", "load efficiency",
               "shared bank conflicts", "global bytes", "traffic amplification")

    def __init__(self, op: str, shape: dict, dtype: torch.dtype, compulsory_bytes: float,
                 rows: list[CountersRow], kwargs: dict | None = None) -> None:
        self.op, self.shape, self.dtype, self.compulsory_bytes, self.rows = op, shape, dtype, compulsory_bytes, rows
        self.kwargs = dict(kwargs or {})  # the call options every variant got (causal=...)

    def flops(self) -> float:
        """Return the op's FLOPs at this problem (its contract's formula, the same for every variant)."""
        from workbench.registry import get_op

        return float(get_op(self.op).flops(**self.shape, **self.kwargs))

    def __getitem__(self, label: str) -> CountersRow:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(f"counters table of {self.op}: no row {label!r}; rows: {[r.label for r in self.rows]}")

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def cells(self) -> list[tuple[str, ...]]:
        """Return each row's cells as text, in the order of ``COLUMNS``."""
        out = []
        for r in self.rows:
            out.append((r.label, r.backends, _num(r.sectors_per_load, ".3g"), _num(r.sectors_per_store, ".3g"),
                        "-" if r.load_efficiency is None else f"{100 * r.load_efficiency:.3g}%",
                        _num(r.bank_conflicts, ","), _bytes(r.global_bytes), _num(r.amplification, ".3g") +
                        ("x" if r.amplification is not None else "")))
        return out

    def title(self) -> str:
        """Return the line above the table: the op, its problem and its compulsory bytes."""
        dims = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        dt = str(self.dtype).replace("torch.", "")
        return (f"{self.op}({dims}, {dt}): compulsory bytes (inputs read once, output written once) = "
                f"{int(self.compulsory_bytes):,} B")

    def notes(self) -> list[str]:
        """Return the footnotes: the counting model and what a row could not count."""
        out = [_NOTE]
        out += [f"{r.label}: {r.note}" for r in self.rows if r.note]
        return out

    def __str__(self) -> str:
        body = [self.COLUMNS, *self.cells()]
        widths = [max(len(row[i]) for row in body) for i in range(len(self.COLUMNS))]
        lines = [self.title()]
        for j, row in enumerate(body):
            pairs = enumerate(zip(row, widths, strict=True))
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs))
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines + self.notes())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = html.escape
        st = "padding:2px 8px;white-space:nowrap"
        head = "".join(f"<th style='{st}'>{e(c)}</th>" for c in self.COLUMNS)
        body = "".join("<tr>" + "".join(
            f"<td style='{st};text-align:{'left' if i < 2 else 'right'}'>{e(c)}</td>" for i, c in enumerate(row))
            + "</tr>" for row in self.cells())
        foot = "".join(f"<div style='font-size:85%;color:#555'>{e(n)}</div>" for n in self.notes())
        return (f"<div><div><b>{e(self.title())}</b></div><table style='font-size:90%'><tr>{head}</tr>{body}"
                f"</table>{foot}</div>")

    def _repr_markdown_(self) -> str:
        def row(cells: tuple[str, ...]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        lines = [f"**{self.title()}**", "", row(self.COLUMNS), "|" + "---|" * len(self.COLUMNS)]
        lines += [row(c) for c in self.cells()]
        return "\n".join(lines + [""] + [f"*{n}*  " for n in self.notes()])
