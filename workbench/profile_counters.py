"""Exact memory counters from the emulators, in Nsight Compute's words: ``wb.profile(fn, *inputs) -> Profile``.

``wb.profile`` is :func:`profile` here. It runs one call (a registered variant, an op-like function, a learner's
function, or a zero-argument lambda that launches ``RawKernel``s) with every emulated launch inside it counted, and
returns a :class:`Profile`: ``.metrics`` (summed over the launches, keyed by Nsight Compute metric names where one
exists, ``wb__...`` otherwise; the catalogue is :mod:`workbench.profile_metrics`), ``.launches`` (one
:class:`LaunchRecord` per launch) and ``.report()`` (a table: one line per metric, what it means and what a good
value is). In gpu mode the same call runs under ``ncu`` in a subprocess and the real values come back under the same
keys.

How a backend contributes its counts (the contract for backend authors)
-----------------------------------------------------------------------
1. While ``profile()`` runs the call, a counting session is active: :func:`active` returns True. A backend that
   launches a kernel checks it (cheaply) and, when it is on, runs the launch in its counting mode.
2. After the launch it calls :func:`record_launch`::

       from workbench import profile_counters as _profile
       if _profile.active():
           ... run the launch counting ...
           _profile.record_launch(kernel="add_kernel", backend="triton", grid=(4,), block=None,
                                  metrics={"wb__global_load_bytes.sum": 3072, ...})

   ``metrics`` holds *sums* over the launch (ints, or floats for FLOPs): :func:`Profile.metrics` adds them up over
   launches and computes the derived figures (ratios, efficiencies, totals) itself, so a backend never records a
   ratio. Every key must be in :data:`METRICS`: use the catalogue's keys where they mean what your backend counts,
   and declare your own in :mod:`workbench.profile_metrics`, with the others, so that the catalogue is complete
   at import (prefix them with the backend, e.g. ``triton__...``).
   Backend-neutral totals every counting backend should record, so that variants of different backends compare in
   one table: ``wb__global_load_bytes.sum`` and ``wb__global_store_bytes.sum`` (the bytes moved to and from global
   memory as this backend sees them: 32 x sectors for CUDA C, bytes requested by unmasked lanes for Triton).
3. A backend that cannot count a launch records it anyway with ``counted=False`` and a ``note`` saying why
   ("not counted for numba: ..."): the Profile then says what is missing instead of showing zeros.

4. Access pictures (``Profile.picture``/``Profile.trace``) run the call again inside :func:`tracing`. A backend
   that can trace asks :func:`trace_wanted` (None unless this launch is the one wanted: normal and profiled launches
   pay one check) for the block and warp, and hands its per-lane accesses to :func:`record_trace` before it records
   the launch (the format: ``workbench.access_picture.trace_from_rows``).

In gpu mode :mod:`workbench.profile_ncu` runs the call under Nsight Compute instead and returns a Profile of the
same form.

Nothing here imports a backend: the CUDA C engine (workbench.cuda._cpu), the Triton interpreter
(workbench._triton_interp) and the Numba simulator (workbench._numba_sim) import this module and report to it.
"""

from __future__ import annotations

import contextlib
import contextvars
import html
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.profile_metrics import METRICS, Metric, resolve, with_derived

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from workbench.access_picture import LaunchTrace

__all__ = ["LaunchRecord", "NcuNotFoundError", "Profile", "ProfileError", "Report", "active", "allocation_start",
           "counting", "profile", "record_launch", "record_trace", "trace_wanted", "tracing"]


class ProfileError(RuntimeError):
    """wb.profile could not count the call (bad target, nothing to run, ncu failed)."""


class NcuNotFoundError(ProfileError):
    """gpu mode: Nsight Compute's ``ncu`` is not on PATH."""


# ----------------------------------------------------------------------------------------------------- launches
@dataclass
class LaunchRecord:
    """One kernel launch inside a profiled call.

    ``backend``: ``"cuda"`` (CUDA C on the CPU engine), ``"triton"`` (interpreter), ``"numba"`` (simulator),
    ``"ncu"`` (a real GPU). ``counts``: the sums the backend recorded; ``counted=False`` with a ``note`` when the
    backend could not count this launch.
    """

    kernel: str
    backend: str
    grid: tuple[int, ...] = ()
    block: tuple[int, ...] | None = None
    counts: dict[str, float] = field(default_factory=dict)
    counted: bool = True
    note: str = ""

    @property
    def metrics(self) -> dict[str, float]:
        """Return this launch's sums and the figures derived from them."""
        return with_derived(self.counts)


_SESSION: contextvars.ContextVar[list[LaunchRecord] | None] = contextvars.ContextVar("wb_profile", default=None)


def active() -> bool:
    """Return True while a profiled call runs: backends then count their launches and call record_launch."""
    return _SESSION.get() is not None


def record_launch(kernel: str, backend: str, *, grid: tuple[int, ...] | int = (), block: tuple[int, ...] | None = None,
                  metrics: dict[str, float] | None = None, counted: bool = True, note: str = "") -> None:
    """Add one launch to the profiled call in progress (nothing happens outside ``profile()``).

    ``metrics``: sums over the launch, keyed by :data:`METRICS` keys of kind ``"sum"`` (see the module docstring).
    """
    session = _SESSION.get()
    if session is None:
        return
    counts = dict(metrics or {})
    for k in counts:
        m = METRICS.get(k)
        if m is None or m.kind != "sum":
            raise KeyError(f"record_launch({kernel!r}, backend={backend!r}): {k!r} is not a summable profile metric; "
                           "declare it in workbench.profile_metrics first")
    g = (int(grid),) if isinstance(grid, int) else tuple(int(x) for x in grid)
    b = None if block is None else tuple(int(x) for x in block)
    session.append(LaunchRecord(kernel, backend, g, b, counts, counted, note))


def allocation_start(a: Any) -> int:
    """Return the address of the first byte of the allocation an array or tensor (or a view of one) lives in.

    Backends count 32-byte sectors from there, as a GPU's allocator (cudaMalloc: 256-byte aligned) would place it;
    0 when unknown.
    """
    if type(a).__module__.startswith("torch"):
        return int(a.untyped_storage().data_ptr())
    import numpy as np

    while isinstance(a, np.ndarray) and a.base is not None:
        if isinstance(a.base, np.ndarray):
            a = a.base
        elif type(a.base).__module__.startswith("torch"):
            return int(a.base.untyped_storage().data_ptr())
        else:
            break
    return int(a.__array_interface__["data"][0]) if isinstance(a, np.ndarray) else 0


@dataclass
class TraceWanted:
    """What an access picture asks the backend to trace: one launch of a re-run, one block, one warp or all (-1)."""

    launch: int
    block: int
    warp: int
    result: Any = None  # the backend's trace (workbench.access_picture.LaunchTrace)


_TRACE: contextvars.ContextVar[TraceWanted | None] = contextvars.ContextVar("wb_trace", default=None)


def trace_wanted() -> TraceWanted | None:
    """Return what to trace when the launch about to be recorded is the one an access picture wants, else None."""
    want, session = _TRACE.get(), _SESSION.get()
    if want is None or session is None or len(session) != want.launch:
        return None
    return want


def record_trace(trace: Any) -> None:
    """Hand the trace of the launch about to be recorded to the access picture that asked for it."""
    want = trace_wanted()
    if want is not None:
        want.result = trace


@contextlib.contextmanager
def tracing(launch: int, block: int, warp: int) -> Iterator[TraceWanted]:
    """Trace one launch (its index in the call) inside the block; yields where the backend leaves the trace."""
    want = TraceWanted(launch, block, warp)
    token = _TRACE.set(want)
    try:
        yield want
    finally:
        _TRACE.reset(token)


@contextlib.contextmanager
def counting() -> Iterator[list[LaunchRecord]]:
    """Count every emulated launch inside the block; yields the list the launches are appended to."""
    launches: list[LaunchRecord] = []
    token = _SESSION.set(launches)
    try:
        yield launches
    finally:
        _SESSION.reset(token)


# ----------------------------------------------------------------------------------------------------- results
class Profile:
    """The counts of one profiled call: ``metrics`` (summed + derived), ``launches``, ``report()``."""

    def __init__(self, launches: list[LaunchRecord], source: str, target: str = "", output: Any = None) -> None:
        self.launches = list(launches)
        self.source = source  # "emulated" (exact counts from the emulators) or "ncu" (a real GPU)
        self.target = target
        self.output = output  # what the call returned
        self.rerun: Callable[[], Any] | None = None  # the call again (access pictures trace a second run of it)
        self._traces: dict[tuple[int, int, int], Any] = {}

    @property
    def metrics(self) -> dict[str, float]:
        """Return the counters summed over the counted launches, and the figures derived from the sums."""
        sums: dict[str, float] = {}
        for rec in self.launches:
            if rec.counted:
                for k, v in rec.counts.items():
                    sums[k] = sums.get(k, 0) + v
        return with_derived(sums)

    @property
    def complete(self) -> bool:
        """True when every launch was counted (False: some backend could not count; see ``notes``)."""
        return all(r.counted for r in self.launches)

    @property
    def notes(self) -> list[str]:
        """Return what was not counted, wholly or in part, and why (one line per distinct reason)."""
        out = []
        for r in self.launches:
            if not r.counted or r.note:
                line = f"{r.kernel} ({r.backend}): {r.note or 'not counted'}"
                if line not in out:
                    out.append(line)
        return out

    def __getitem__(self, name: str) -> float:
        key = resolve(name)
        m = self.metrics
        if key not in m:
            raise KeyError(f"{METRICS[key].label!r} ({key}) was not counted in this profile: "
                           + (self._why_missing() or "no launch reported it"))
        return m[key]

    def get(self, name: str, default: Any = None) -> Any:
        """Return a metric by key, label or alias, or ``default`` when this profile has no value for it."""
        return self.metrics.get(resolve(name), default)

    def _why_missing(self) -> str:
        if not self.launches:
            return "the call made no emulated kernel launch (torch and numpy operations are not counted)"
        return "; ".join(self.notes)

    def report(self, keys: list[str] | None = None, detail: bool = False) -> Report:
        """Return the table of this profile: one row per metric with its value, meaning and a good value.

        ``keys`` (keys, labels or aliases) picks the rows; otherwise every metric with something to say is shown
        (groups with only zeros are left out), and ``detail=True`` adds the raw counts behind the ratios.
        """
        return Report(self, keys, detail)

    def _repr_html_(self) -> str:
        return self.report()._repr_html_()

    def trace(self, kernel: str | int | None = None, *, block: int | tuple[int, ...] = 0,
              warp: int | str = 0) -> LaunchTrace:
        """Return the per-lane accesses of one warp (or ``warp="all"``: the whole block) of one launch.

        The call runs again with that block traced (CUDA C and Numba launches; see workbench.access_picture).
        """
        from workbench import access_picture

        return access_picture.trace(self, kernel, block=block, warp=warp)

    def picture(self, kernel: str | int | None = None, buffer: str | int | None = None, *,
                block: int | tuple[int, ...] = 0, warp: int | str = 0, request: int = 0,
                kind: str | None = None) -> go.Figure:
        """Return a plotly figure of one request's accesses to ``buffer``: global sectors or shared banks, by lane.

        ``kernel``: a kernel name or launch index (None: the only kernel); ``buffer``: a pointer parameter's name or
        index, or a ``__shared__`` variable's name; ``warp="all"``: every warp of the block; ``kind``: ``"load"``,
        ``"store"`` or ``"atomic"`` requests only. See workbench.access_picture.
        """
        from workbench import access_picture

        return access_picture.picture(self, kernel, buffer, block=block, warp=warp, request=request, kind=kind)

    def __repr__(self) -> str:
        n = len(self.launches)
        what = "ncu on a GPU" if self.source == "ncu" else "exact emulated counts"
        return (f"<Profile of {self.target or 'a call'}: {n} launch{'es' if n != 1 else ''}, {what}"
                f"{'' if self.complete else ', INCOMPLETE'}; .report() for the table>")


def _fmt(m: Metric, v: float) -> str:
    if m.fmt == "fraction":
        return f"{v:.3g} ({100 * v:.1f}%)"
    if m.fmt == "ratio":
        return f"{v:.3g}"
    if m.fmt == "float":
        return f"{v:.4g}"
    if m.fmt == "bytes":
        return f"{int(v):,} B" if v < 10_000 else f"{int(v):,} B ({_human_bytes(v)})"
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.4g}"


def _human_bytes(v: float) -> str:
    for unit, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= s:
            return f"{v / s:.3g} {unit}"
    return f"{v:g} B"


def _default_rows(m: dict[str, float], detail: bool) -> list[str]:
    """Return the keys a report shows by default: groups with a non-zero count; no zero synchronisation rows."""
    busy = {meta.group for k, meta in METRICS.items() if meta.kind == "sum" and m.get(k)}
    out = []
    for k, meta in METRICS.items():
        if k not in m or meta.group == "hidden" or (meta.detail and not detail) or meta.group not in busy:
            continue
        if meta.group in ("sync", "launch") and not m[k] and k != "wb__threads.sum":
            continue
        out.append(k)
    return out


_MODEL_NOTE = ("Exact counts of the emulated run: L1-level requests and 32-byte sectors, shared-memory wavefronts of "
               "the 32-bank model. Not modelled: caches beyond the sector (L1/L2 hits, DRAM), latency, issue rate.")


class Report:
    """A profile's table: ``_repr_html_`` in a notebook, ``str()`` for text; ``rows`` as (label, value, key, ...)."""

    def __init__(self, prof: Profile, keys: list[str] | None = None, detail: bool = False) -> None:
        self.profile = prof
        m = prof.metrics
        wanted = [resolve(k) for k in keys] if keys is not None else _default_rows(m, detail)
        self.rows: list[tuple[str, str, str, str, str]] = []  # (label, value, meaning, good, key)
        for k in wanted:
            meta = METRICS[k]
            if k in m:
                self.rows.append((meta.label, _fmt(meta, m[k]), meta.meaning, meta.good_text(m), k))

    def _head(self) -> str:
        p = self.profile
        n = len(p.launches)
        backends = sorted({r.backend for r in p.launches})
        src = ("measured by Nsight Compute (ncu) on a GPU" if p.source == "ncu"
               else "exact counts from the emulators (" + (", ".join(backends) or "no launch") + ")")
        return f"wb.profile({p.target or 'call'}): {n} launch{'es' if n != 1 else ''}, {src}"

    def _footer(self) -> list[str]:
        p = self.profile
        lines = [] if p.source == "ncu" else [_MODEL_NOTE]
        if not p.launches:
            lines.insert(0, "No emulated kernel launch happened in this call: nothing to count (torch and numpy "
                            "operations run natively and are not counted).")
        lines += [f"not counted: {n}" for n in p.notes]
        return lines

    def _launch_rows(self) -> list[tuple[str, ...]]:
        out = []
        for r in self.profile.launches:
            mm = r.metrics
            if not r.counted:
                out.append((r.kernel, r.backend, _dims(r.grid), _dims(r.block), "not counted"))
                continue
            keys = ["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio", "wb__global_bytes.sum"]
            if mm.get("smsp__inst_executed_op_shared_ld.sum") or mm.get("smsp__inst_executed_op_shared_st.sum"):
                keys.insert(1, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")
            bits = [f"{METRICS[k].label} {_fmt(METRICS[k], mm[k])}" for k in keys if k in mm]
            out.append((r.kernel, r.backend, _dims(r.grid), _dims(r.block), "; ".join(bits)))
        return out

    def __str__(self) -> str:
        lines = [self._head()]
        if self.rows:
            w0 = max(len(r[0]) for r in self.rows)
            w1 = max(len(r[1]) for r in self.rows)
            for label, val, meaning, good, _ in self.rows:
                lines.append(f"  {label:<{w0}}  {val:>{w1}}   {meaning}" + (f"  [good: {good}]" if good else ""))
        if len(self.profile.launches) > 1:
            lines.append("  per launch:")
            lines += [f"    {k} [{b}] grid {g} block {bl}: {s}" for k, b, g, bl, s in self._launch_rows()]
        lines += self._footer()
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = html.escape
        cell = "padding:2px 8px;text-align:left;vertical-align:top"
        rows = "".join(
            f"<tr><td style='{cell};white-space:nowrap' title='{e(k)}'>{e(label)}</td>"
            f"<td style='{cell};text-align:right;font-family:monospace;white-space:nowrap'>{e(val)}</td>"
            f"<td style='{cell}'>{e(meaning)}</td><td style='{cell}'>{e(good)}</td></tr>"
            for label, val, meaning, good, k in self.rows)
        head = (f"<tr><th style='{cell}'>metric</th><th style='{cell}'>value</th><th style='{cell}'>meaning</th>"
                f"<th style='{cell}'>good value</th></tr>")
        per = ""
        if len(self.profile.launches) > 1:
            lr = "".join(f"<tr>{''.join(f'<td style={chr(39)}{cell}{chr(39)}>{e(x)}</td>' for x in row)}</tr>"
                         for row in self._launch_rows())
            per = (f"<details><summary>per launch ({len(self.profile.launches)})</summary>"
                   f"<table style='font-size:90%'><tr><th style='{cell}'>kernel</th><th style='{cell}'>backend</th>"
                   f"<th style='{cell}'>grid</th><th style='{cell}'>block</th><th style='{cell}'>counters</th></tr>"
                   f"{lr}</table></details>")
        foot = "".join(f"<div style='font-size:85%;color:#555'>{e(x)}</div>" for x in self._footer())
        return (f"<div><div><b>{e(self._head())}</b></div><table style='font-size:90%'>{head}{rows}</table>"
                f"{per}{foot}</div>")


def _dims(d: tuple[int, ...] | None) -> str:
    if d is None:
        return "-"
    return "(" + ",".join(str(x) for x in d) + ")"


# ----------------------------------------------------------------------------------------------------- profile()
def _target(fn: Any, inputs: tuple, kw: dict) -> tuple[Callable[[], Any], str, dict]:
    """Return (a zero-argument call, its name, a replay spec for ncu) for what profile() was given."""
    from workbench.registry import Variant, get_op, make_inputs, variant

    if isinstance(fn, str):
        if "/" not in fn:
            raise ProfileError(f"wb.profile({fn!r}): name a variant as 'op/variant' (e.g. 'gemm/cuda_smem'), or pass "
                               "the variant, a function or a lambda")
        op, name = fn.split("/", 1)
        fn = variant(op, name)
    if isinstance(fn, Variant):
        v = fn
        if not inputs:
            spec = get_op(v.op)
            sizes = {k: kw.pop(k) for k in list(kw) if k in spec.shape_keys or k in spec.call_kwargs}
            if not sizes:
                raise ProfileError(f"wb.profile({v.op}/{v.name}): pass its inputs, or the sizes to make them "
                                   f"({', '.join(f'{k}=...' for k in spec.shape_keys)}, dtype=...)")
            dtype, seed = kw.pop("dtype", None), kw.pop("seed", 0)
            if kw:
                raise ProfileError(f"wb.profile({v.op}/{v.name}): unknown keyword(s) {sorted(kw)}; the sizes are "
                                   f"{list(spec.shape_keys)}" + (f", the call options {list(spec.call_kwargs)}"
                                                                 if spec.call_kwargs else ""))
            inputs = make_inputs(v.op, dtype=dtype, seed=seed, **sizes)
            kw = {k: sizes[k] for k in spec.call_kwargs if k in sizes}
        return (lambda: v(*inputs, **kw)), f"{v.op}/{v.name}", {"kind": "variant", "op": v.op, "name": v.name,
                                                                "inputs": inputs, "kwargs": kw}
    if not callable(fn):
        raise ProfileError(f"wb.profile: expected a registered variant, a function or a zero-argument lambda, got "
                           f"{type(fn).__name__} {fn!r}"[:200])
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    replay = {"kind": "import", "module": getattr(fn, "__module__", None), "qualname": name, "inputs": inputs,
              "kwargs": kw}
    return (lambda: fn(*inputs, **kw)), name, replay


def profile(fn: Any, *inputs: Any, **kw: Any) -> Profile:
    """Run ``fn`` once with every kernel launch inside it counted; return the :class:`Profile`.

    ``fn``: a registered variant (or ``"op/variant"``), an op-like function, a learner's function, or a zero-argument
    lambda that launches ``RawKernel``s. It is called as ``fn(*inputs, **kw)``; a variant given sizes instead of
    inputs (``wb.profile(v, M=64, N=64, K=64, dtype="float32")``) gets inputs from ``make_inputs``.
    cpu mode: exact counts from the emulators (CUDA C on the CPU engine; Triton and Numba as their backends count).
    gpu mode: the same call runs again under Nsight Compute (``ncu``, which must be on PATH) in a subprocess, and its
    real values come back under the same keys.
    """
    from workbench._mode import MODE

    call, name, replay = _target(fn, inputs, dict(kw))
    if MODE == "gpu":
        from workbench import profile_ncu

        return profile_ncu.run_under_ncu(replay, name)
    with counting() as launches:
        out = call()
    prof = Profile(launches, "emulated", name, out)
    prof.rerun = call
    return prof
