"""Access pictures: the bytes, sectors and banks each lane of a warp touched, drawn from the emulators' trace.

``p = wb.profile(fn, *inputs)`` counts every request of the call; ``p.picture(kernel, buffer)`` shows where those
counts come from, for one warp (``warp=0`` of ``block=0`` by default) or a whole block (``warp="all"``):

* a global buffer (a pointer parameter, by name or index): the request's bytes, one cell per byte, coloured by the
  lane that asked for it, on rows of 128-byte lines, with the 32-byte sectors the request touched shaded;
* a shared-memory variable (a ``__shared__`` array by name, or the ``extern __shared__`` one): the bank map of the
  request, one column per bank, one row per wavefront, so the tallest column is the conflict.

Tracing is off for every normal and profiled launch. A picture runs the profiled call once more with one block of
one launch traced (``p.trace(...)`` returns that trace: each request's lanes, addresses, sectors and wavefronts),
and counts it by the same model as ``wb.profile`` (its ``metrics()`` use the profile's keys), so the numbers a
picture shows are the profile's. CUDA C on the CPU engine and Numba on the simulator are traced; Triton is not: the
interpreter runs each program as whole numpy arrays and leaves the lane layout to the compiler.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["LaneAccess", "LaunchTrace", "Request", "TracedBuffer", "bank_map_figure", "picture", "trace"]

SECTOR, LINE, BANKS = 32, 128, 32
_WRITE, _ATOMIC = 2, 4  # WB_SAN_* flags of the runtime's trace entries
MAX_LINES = 48  # 128-byte lines a global picture draws (the rest are named in a note)
MAX_WAVEFRONT_ROWS = 64


# ----------------------------------------------------------------------------------------------------- the trace
@dataclass(frozen=True)
class TracedBuffer:
    """Memory a traced launch accessed: a pointer parameter's buffer or a shared-memory variable.

    ``start``: global, bytes from the allocation's first byte to the buffer's (sectors count from the allocation);
    shared, the variable's offset in its window (banks count from the window). ``itemsize``: bytes per element of
    the parameter's type (0 when unknown: shared variables).
    """

    name: str
    space: str
    param: int | None = None
    itemsize: int = 0
    start: int = 0
    nbytes: int = 0


@dataclass(frozen=True)
class LaneAccess:
    """One lane's part of a request: ``addr`` from the allocation (or window) start, ``offset`` from the buffer's."""

    warp: int
    lane: int
    thread: tuple[int, int, int]
    buffer: str
    addr: int
    offset: int
    size: int


@dataclass
class Request:
    """One warp-level request, as wb.profile counts it: the accesses of the lanes that executed it."""

    warp: int
    seq: int
    space: str
    kind: str  # "load", "store" or "atomic"
    line: int | None
    code: str
    accesses: list[LaneAccess] = field(default_factory=list)

    @property
    def buffers(self) -> list[str]:
        """Return the names of the buffers this request's lanes access."""
        return sorted({a.buffer for a in self.accesses})

    @property
    def bytes_requested(self) -> int:
        """Return the bytes the active lanes ask for."""
        return sum(a.size for a in self.accesses)

    def sectors(self) -> list[int]:
        """Return the 32-byte sectors (from the allocation start) the lanes' bytes fall in, each once."""
        out: set[int] = set()
        for a in self.accesses:
            out.update(range(a.addr // SECTOR, (a.addr + max(a.size, 1) - 1) // SECTOR + 1))
        return sorted(out)

    @property
    def lanes_per_phase(self) -> int:
        """Return the lanes a shared request serves at once: 32 up to 4-byte accesses, 16 for 8, 8 for 16."""
        width = max((a.size for a in self.accesses), default=4)
        return 32 if width <= 4 else 16 if width <= 8 else 8

    def bank_phases(self) -> dict[int, dict[int, list[int]]]:
        """Return {phase: {bank: distinct 4-byte words}} of the phases with active lanes."""
        per_phase = self.lanes_per_phase
        phases: dict[int, dict[int, set[int]]] = {}
        for a in self.accesses:
            banks = phases.setdefault(a.lane // per_phase, {})
            for w in range(a.addr // 4, (a.addr + max(a.size, 1) - 1) // 4 + 1):
                banks.setdefault(w % BANKS, set()).add(w)
        return {p: {b: sorted(ws) for b, ws in sorted(banks.items())} for p, banks in sorted(phases.items())}

    @property
    def wavefronts(self) -> int:
        """Return the passes through the 32 banks this shared request needs (the most words one bank serves)."""
        return sum(max(len(ws) for ws in banks.values()) for banks in self.bank_phases().values())

    @property
    def bank_conflicts(self) -> int:
        """Return the wavefronts beyond one per active phase."""
        return self.wavefronts - len(self.bank_phases())


_KEYS = {  # (space, kind) -> profile keys: requests, sectors or wavefronts, bytes requested, lanes, conflicts
    ("global", "load"): ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                         "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "smsp__sass_data_bytes_mem_global_op_ld.sum",
                         "smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum", None),
    ("global", "store"): ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
                          "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                          "smsp__sass_data_bytes_mem_global_op_st.sum",
                          "smsp__sass_thread_inst_executed_op_global_st_pred_on.sum", None),
    ("shared", "load"): ("smsp__inst_executed_op_shared_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                         "smsp__sass_data_bytes_mem_shared_op_ld.sum",
                         "smsp__sass_thread_inst_executed_op_shared_ld_pred_on.sum",
                         "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    ("shared", "store"): ("smsp__inst_executed_op_shared_st.sum",
                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                          "smsp__sass_data_bytes_mem_shared_op_st.sum",
                          "smsp__sass_thread_inst_executed_op_shared_st_pred_on.sum",
                          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    ("global", "atomic"): ("wb__global_atomic_requests.sum", None, None, "wb__global_atomics.sum", None),
    ("shared", "atomic"): ("smsp__inst_executed_op_shared_atom.sum", None, None, "wb__shared_atomics.sum", None),
}


def _add(m: dict[str, float], key: str | None, v: float) -> None:
    if key is not None:
        m[key] = m.get(key, 0) + v


@dataclass
class LaunchTrace:
    """The traced requests of one block of one launch (one warp's, or every warp's with ``warp=None``)."""

    kernel: str
    backend: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    traced_block: tuple[int, int, int]
    warp: int | None
    buffers: dict[str, TracedBuffer]
    requests: list[Request]
    dropped: int = 0  # accesses beyond the trace's capacity, not kept

    def buffer(self, which: str | int) -> TracedBuffer:
        """Return a traced buffer by name, or a global one by its kernel parameter index; the error lists them."""
        for b in self.buffers.values():
            if b.name == which or (isinstance(which, int) and b.param == which):
                return b
        from workbench.profile_counters import ProfileError

        raise ProfileError(f"{self._who()} made no request to {which!r}; it accessed: {self._listing()}")

    def on(self, which: str | int) -> list[Request]:
        """Return the requests whose lanes access ``which`` (a buffer name or parameter index), in program order."""
        name = self.buffer(which).name
        return [r for r in self.requests if name in r.buffers]

    def metrics(self, which: str | int | None = None) -> dict[str, float]:
        """Return the profile's counters over the traced requests (of ``which`` only, if given), and derived ones."""
        from workbench.profile_metrics import with_derived as _with_derived

        m: dict[str, float] = {}
        for r in self.requests if which is None else self.on(which):
            req, amount, nbytes, lanes, conflicts = _KEYS[(r.space, r.kind)]
            _add(m, req, 1)
            _add(m, lanes, len(r.accesses))
            if r.kind == "atomic":
                continue
            _add(m, nbytes, r.bytes_requested)
            _add(m, amount, len(r.sectors()) if r.space == "global" else r.wavefronts)
            _add(m, conflicts, r.bank_conflicts if r.space == "shared" else 0)
        for op, word in (("ld", "load"), ("st", "store")):
            if f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum" in m:
                m[f"wb__global_{word}_bytes.sum"] = 32 * m[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"]
        return _with_derived(m)

    def _who(self) -> str:
        w = "every warp" if self.warp is None else f"warp {self.warp}"
        return f"{w} of block {_dims(self.traced_block)} of {self.kernel!r}"

    def _listing(self) -> str:
        if not self.buffers:
            return "nothing (no global or shared request)"
        parts = []
        for b in self.buffers.values():
            n = sum(b.name in r.buffers for r in self.requests)
            where = f"parameter {b.param}" if b.param is not None else b.space
            parts.append(f"{b.name} ({b.space}, {where}: {n} request{'s' if n != 1 else ''})"
                         if b.space == "global" else f"{b.name} (shared: {n} request{'s' if n != 1 else ''})")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return (f"<LaunchTrace of {self._who()}: {len(self.requests)} requests to {self._listing()}"
                f"{f'; {self.dropped} accesses dropped' if self.dropped else ''}>")


def _dims(d: tuple[int, ...]) -> str:
    return "(" + ",".join(str(x) for x in d) + ")"


def _coords(i: int, dims: tuple[int, ...]) -> tuple[int, int, int]:
    x, y = dims[0], dims[1] if len(dims) > 1 else 1
    return (i % x, (i // x) % y, i // (x * y))


def _pad3(d: tuple[int, ...]) -> tuple[int, int, int]:
    t = tuple(int(v) for v in d) + (1, 1, 1)
    return (t[0], t[1], t[2])


def _shared_buffer(off: int, region: int, shared: list[tuple[str, int, int]], dyn: TracedBuffer) -> TracedBuffer:
    """Return the shared variable a window offset falls in (region -1: static, -2: dynamic)."""
    if region == -2:
        return dyn
    for name, lo, size in shared:
        if lo <= off < lo + size:
            return TracedBuffer(name, "shared", None, 0, lo, size)
    return TracedBuffer("__shared__", "shared", None, 0, 0, 0)


def trace_from_rows(rows: Iterable[tuple], *, kernel: str, backend: str, grid: tuple, block: tuple,
                    traced_block: int, warp: int, buffers: dict[int, tuple], shared: list[tuple[str, int, int]],
                    lines: dict[int, tuple[int | None, str]], dynamic_name: str = "extern __shared__",
                    dynamic_bytes: int = 0, dropped: int = 0) -> LaunchTrace:
    """Return the LaunchTrace of a backend's traced accesses, in the CPU engine's format.

    ``rows``: (offset, request, bytes | WB_SAN_* flags << 28, site, region, warp, lane) per lane access, where the
    offset is from the allocation start (region >= 0: a global buffer) or the shared window's (region -1: static,
    -2: dynamic shared memory). ``buffers``: {region: (name, parameter, element bytes, bytes from the allocation
    start, bytes)}; ``shared``: the static shared variables as (name, offset in the window, bytes); ``lines``:
    {site: (line, source text)}.
    """
    g, b = _pad3(grid), _pad3(block)
    dyn = TracedBuffer(dynamic_name, "shared", None, 0, 0, dynamic_bytes)
    origin = min((lo for _, lo, _ in shared), default=0)  # banks count from the first variable, as nvcc lays it out
    shared = [(n, lo - origin, size) for n, lo, size in shared]
    glob = {i: TracedBuffer(n, "global", p, s, st, nb) for i, (n, p, s, st, nb) in buffers.items()}
    seen: dict[str, TracedBuffer] = {}
    reqs: dict[tuple[int, int, str], Request] = {}
    for off, req, sf, pc, region, wi, lane in rows:
        space = "global" if region >= 0 else "shared"
        off -= origin if region == -1 else 0
        buf = ((glob.get(region) or TracedBuffer(f"buffer {region}", "global")) if space == "global"
               else _shared_buffer(off, region, shared, dyn))
        seen.setdefault(buf.name, buf)
        key = (wi, req, space)
        r = reqs.get(key)
        if r is None:
            flags = sf >> 28
            kind = "atomic" if flags & _ATOMIC else "store" if flags & _WRITE else "load"
            line, code = lines.get(pc, (None, ""))
            r = reqs[key] = Request(wi, req, space, kind, line, code)
        r.accesses.append(LaneAccess(wi, lane, _coords(wi * 32 + lane, b), buf.name, off, off - buf.start,
                                     sf & 0x0FFFFFFF))
    return LaunchTrace(kernel, backend, g, b, _coords(traced_block, g), None if warp < 0 else warp, seen,
                       sorted(reqs.values(), key=lambda r: (r.warp, r.seq, r.space)), dropped)


# ----------------------------------------------------------------------------------------------------- tracing
def _error(msg: str) -> Exception:
    from workbench.profile_counters import ProfileError

    return ProfileError(msg)


def _launch_list(prof: Any) -> str:
    return "; ".join(f"{i}: {r.kernel!r} ({r.backend}, grid {_dims(r.grid)}, block {_dims(r.block or ())})"
                     for i, r in enumerate(prof.launches))


def _pick_launch(prof: Any, kernel: str | int | None) -> int:
    """Return the index of the launch ``kernel`` names (a kernel name, a launch index, or None when one kernel)."""
    launches = prof.launches
    if not launches:
        raise _error(f"wb.profile({prof.target or 'call'}) made no emulated kernel launch: nothing to picture")
    names = list(dict.fromkeys(r.kernel for r in launches))
    if kernel is None:
        if len(names) > 1:
            raise _error(f"this profile has launches of {len(names)} kernels; name one (or give a launch index): "
                         f"{_launch_list(prof)}")
        return 0
    if isinstance(kernel, int) and not isinstance(kernel, bool):
        if not -len(launches) <= kernel < len(launches):
            raise _error(f"launch index {kernel} is out of range: this profile has {len(launches)} launch"
                         f"{'es' if len(launches) != 1 else ''}: {_launch_list(prof)}")
        return kernel % len(launches)
    for i, r in enumerate(launches):
        if r.kernel == kernel:
            return i
    raise _error(f"no launch of a kernel named {kernel!r} in this profile; its launches: {_launch_list(prof)}")


_NO_TRACE = {
    "triton": ("Triton launches have no per-lane trace: the interpreter runs each program as whole numpy arrays, "
               "and which lane loads which element is the Triton compiler's choice, not the kernel's, so there are "
               "no warps or lanes to draw. p.report() still counts the bytes its tl.load/tl.store request. Access "
               "pictures are for CUDA C (CPU engine) and Numba (simulator) launches."),
    "ncu": ("a profile measured by Nsight Compute on a GPU holds counters, not per-lane addresses: access pictures "
            "come from the emulators' trace. Profile the call in cpu mode (WORKBENCH_MODE=cpu) to draw one."),
}


def _check_traceable(prof: Any, index: int) -> Any:
    rec = prof.launches[index]
    if prof.source == "ncu" or rec.backend in _NO_TRACE:
        raise _error(f"launch {index} ({rec.kernel!r}): " + _NO_TRACE.get(rec.backend, _NO_TRACE["ncu"]))
    if not rec.counted:
        raise _error(f"launch {index} ({rec.kernel!r}, {rec.backend}) was not counted ({rec.note}), so it cannot be "
                     "traced either")
    if prof.rerun is None:
        raise _error("this Profile cannot run its call again (it was not made by wb.profile), and a picture traces "
                     "a second run")
    return rec


def _block_index(block: int | tuple[int, ...], rec: Any) -> int:
    """Return the linear index of ``block`` (an index or (x, y, z) coordinates) in the launch's grid."""
    g = _pad3(rec.grid)
    n = g[0] * g[1] * g[2]
    if isinstance(block, int) and not isinstance(block, bool):
        if not 0 <= block < n:
            raise _error(f"block {block} is outside the grid {_dims(rec.grid)} of {rec.kernel!r}: blocks 0..{n - 1}")
        return block
    c = (tuple(int(v) for v in block) + (0, 0, 0))[:3]
    if len(tuple(block)) > 3 or not all(0 <= c[i] < g[i] for i in range(3)):
        raise _error(f"block {_dims(tuple(block))} is outside the grid {_dims(rec.grid)} of {rec.kernel!r}")
    return c[0] + g[0] * (c[1] + g[1] * c[2])


def _warp_index(warp: int | str, rec: Any) -> int:
    """Return the warp to trace, or -1 for ``"all"`` (the whole block)."""
    b = _pad3(rec.block or (1,))
    nwarps = -(-(b[0] * b[1] * b[2]) // 32)
    if warp == "all":
        return -1
    if isinstance(warp, int) and not isinstance(warp, bool) and 0 <= warp < nwarps:
        return warp
    raise _error(f"warp={warp!r}: a block of {_dims(rec.block or ())} threads of {rec.kernel!r} has "
                 f"{nwarps} warp{'s' if nwarps != 1 else ''} (0..{nwarps - 1}); or warp='all' for the whole block")


def trace(prof: Any, kernel: str | int | None = None, *, block: int | tuple[int, ...] = 0,
          warp: int | str = 0) -> LaunchTrace:
    """Return the trace of one warp (``warp="all"``: every warp) of one block of a profiled launch.

    The profiled call runs once more with that block traced; the trace is kept, so later pictures of other
    buffers of the same block and warp reuse it.
    """
    from workbench import profile_counters as _profile

    index = _pick_launch(prof, kernel)
    rec = _check_traceable(prof, index)
    b, w = _block_index(block, rec), _warp_index(warp, rec)
    key = (index, b, w)
    if key not in prof._traces:
        with _profile.counting() as launches, _profile.tracing(index, b, w) as want:
            prof.rerun()
        again = launches[index] if index < len(launches) else None
        if again is None or again.kernel != rec.kernel:
            raise _error(f"running the call again did not launch {rec.kernel!r} as launch {index} (it launched: "
                         f"{', '.join(r.kernel for r in launches) or 'nothing'}): the call must launch the same "
                         "kernels each time for its launches to be traced")
        if want.result is None:
            raise _error(f"the {rec.backend} backend did not trace launch {index} ({rec.kernel!r})")
        if again.counts != rec.counts:
            warnings.warn(f"the traced run of {rec.kernel!r} counted differently from the profiled one (the call "
                          "depends on state it changes, e.g. data-dependent addresses): the picture shows the "
                          "traced run", stacklevel=3)
        prof._traces[key] = want.result
    return prof._traces[key]


# ----------------------------------------------------------------------------------------------------- pictures
def picture(prof: Any, kernel: str | int | None = None, buffer: str | int | None = None, *,
            block: int | tuple[int, ...] = 0, warp: int | str = 0, request: int = 0,
            kind: str | None = None) -> go.Figure:
    """Return a plotly figure of request ``request`` to ``buffer`` by ``warp`` of ``block`` (``"all"``: each warp's).

    ``kind`` (``"load"``, ``"store"``, ``"atomic"``) counts only those requests. Global buffers: bytes by lane on
    128-byte lines, the sectors touched shaded. Shared variables: the bank map, a row per wavefront.
    ``fig.layout.meta`` holds the counts drawn and the profile's metrics over the traced warp's requests to the
    buffer, under the profile's labels (``meta["sectors per load request"]``).
    """
    tr = trace(prof, kernel, block=block, warp=warp)
    if buffer is None:
        if len(tr.buffers) != 1:
            raise _error(f"name the buffer to draw: {tr._who()} accessed {tr._listing()}")
        buffer = next(iter(tr.buffers))
    buf = tr.buffer(buffer)
    reqs = [r for r in tr.on(buf.name) if kind is None or r.kind == kind]
    if not reqs:
        kinds = sorted({r.kind for r in tr.on(buf.name)})
        raise _error(f"kind={kind!r}: {tr._who()} made no such request to {buf.name}; its requests there are "
                     f"{' and '.join(kinds)}s (kind='load', 'store' or 'atomic', or None for all)")
    by_warp: dict[int, list[Request]] = {}
    for r in reqs:
        by_warp.setdefault(r.warp, []).append(r)
    most = max(len(v) for v in by_warp.values())
    if not (isinstance(request, int) and -most <= request < most):
        raise _error(f"request={request!r}: {tr._who()} made {most} request{'s' if most != 1 else ''} to "
                     f"{buf.name} (0..{most - 1})")
    drawn = [rs[request] for _, rs in sorted(by_warp.items()) if -len(rs) <= request < len(rs)]
    k = request % most
    meta = _meta(tr, buf, drawn, k, most)
    fig = _global_figure(tr, buf, drawn, k, most) if buf.space == "global" else _shared_figure(tr, buf, drawn, k, most)
    fig.update_layout(meta=meta)
    return fig


def _meta(tr: LaunchTrace, buf: TracedBuffer, drawn: list[Request], k: int, n: int) -> dict[str, Any]:
    from workbench.profile_metrics import METRICS

    out: dict[str, Any] = {"kernel": tr.kernel, "backend": tr.backend, "buffer": buf.name, "space": buf.space,
                           "block": list(tr.traced_block), "warp": "all" if tr.warp is None else tr.warp,
                           "request": k, "requests": n}
    if buf.space == "global":
        out["sectors (drawn)"] = [len(r.sectors()) for r in drawn]
    else:
        out["wavefronts (drawn)"] = [r.wavefronts for r in drawn]
        out["bank conflicts (drawn)"] = [r.bank_conflicts for r in drawn]
    for key, v in tr.metrics(buf.name).items():
        out[METRICS[key].label] = v
    return out


def _ranges(xs: list[int]) -> str:
    """Return sorted ints as ``0-3, 8, 10-11``."""
    xs = sorted(set(xs))
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


def _lanes_text(accs: list[LaneAccess]) -> str:
    lanes = [a.lane for a in accs]
    t = accs[0].thread
    who = f"lane {lanes[0]} (thread ({t[0]},{t[1]},{t[2]}))" if len(accs) == 1 else \
        f"{len(accs)} lanes: {_ranges(lanes)}"
    return f"warp {accs[0].warp}, {who}"


def _element(buf: TracedBuffer, a: LaneAccess) -> str:
    if not buf.itemsize:
        return f"{buf.name} + {a.offset} B"
    e0, e1 = a.offset // buf.itemsize, (a.offset + a.size - 1) // buf.itemsize
    return f"{buf.name}[{e0}]" if e0 == e1 else f"{buf.name}[{e0}..{e1}]"


def _kind_text(rs: list[Request]) -> str:
    kinds = sorted({r.kind for r in rs})
    return kinds[0] if len(kinds) == 1 else "/".join(kinds)


def _where_text(tr: LaunchTrace, drawn: list[Request], k: int, n: int) -> str:
    b = _dims(tr.traced_block)
    what = f"{_kind_text(drawn)} {k + 1} of {n}"
    if tr.warp is None:
        return f"{what} of each of the {len(drawn)} warps of block {b}"
    return f"{what}, warp {tr.warp} of block {b}"


def _site(drawn: list[Request]) -> str:
    r = drawn[0]
    if r.line is None:
        return ""
    code = r.code.rstrip("; ")
    code = code if len(code) <= 48 else code[:47] + "…"
    return f"line {r.line}" + (f": {code}" if code else "")


def _global_rows(drawn: list[Request]) -> list[tuple[int, int]]:
    rows = set()
    for r in drawn:
        for a in r.accesses:
            rows.update((r.warp, ln) for ln in range(a.addr // LINE, (a.addr + max(a.size, 1) - 1) // LINE + 1))
    return sorted(rows)


def _global_cells(buf: TracedBuffer, drawn: list[Request], rows: list[tuple[int, int]]) -> tuple:
    """Return the heatmaps' (lane, hover, label, sector, sector hover) matrices, one row per 128-byte line."""
    nan = float("nan")
    row_of = {rw: i for i, rw in enumerate(rows)}
    lane = [[nan] * LINE for _ in rows]
    hover = [[""] * LINE for _ in rows]
    label = [[""] * LINE for _ in rows]
    sect = [[nan] * LINE for _ in rows]
    shover = [[""] * LINE for _ in rows]
    for r in drawn:
        used: dict[int, int] = {}
        at: dict[int, list[LaneAccess]] = {}
        for a in r.accesses:
            for byte in range(a.addr, a.addr + a.size):
                at.setdefault(byte, []).append(a)
                used[byte // SECTOR] = used.get(byte // SECTOR, 0) + 1
        for s in r.sectors():
            for byte in range(s * SECTOR, (s + 1) * SECTOR):
                i = row_of.get((r.warp, byte // LINE))
                if i is not None:
                    sect[i][byte % LINE] = 1.0
                    shover[i][byte % LINE] = (f"sector {s} of the allocation (bytes {s * SECTOR}-{s * SECTOR + 31}): "
                                              f"moved, {used.get(s, 0)} of its 32 B requested")
        for byte, accs in at.items():
            i = row_of.get((r.warp, byte // LINE))
            if i is None:
                continue
            a = accs[0]
            lane[i][byte % LINE] = a.lane
            hover[i][byte % LINE] = (f"{_lanes_text(accs)}<br>{_element(buf, a)}: byte {byte} of the allocation"
                                     f"<br>sector {byte // SECTOR}")
            if byte == a.addr + a.size // 2 and a.size >= 4:
                label[i][byte % LINE] = str(a.lane) if len(accs) == 1 else f"×{len(accs)}"
    return lane, hover, label, sect, shover


def _global_title(tr: LaunchTrace, buf: TracedBuffer, drawn: list[Request], k: int, n: int) -> tuple[str, str]:
    sectors = [len(r.sectors()) for r in drawn]
    asked = sum(r.bytes_requested for r in drawn)
    each = f"{sectors[0]} sectors" if len(set(sectors)) == 1 else f"{sum(sectors) / len(sectors):.3g} sectors each"
    head = f"{buf.name}: {each} per request ({_where_text(tr, drawn, k, n)})"
    moved = 32 * sum(sectors)
    sub = (f"{moved:,} B moved for {asked:,} B requested ({asked / moved:.1%} efficiency)" if moved else "")
    sub = f"{len(drawn)} requests: {sub}" if len(drawn) > 1 and sub else sub
    return head, " · ".join(x for x in (sub, f"{tr.kernel} {_site(drawn)}".rstrip()) if x)


def _global_figure(tr: LaunchTrace, buf: TracedBuffer, drawn: list[Request], k: int, n: int) -> go.Figure:
    import plotly.graph_objects as go

    from workbench import plots

    rows = _global_rows(drawn)
    more = len(rows) - MAX_LINES
    rows = rows[:MAX_LINES]
    lane, hover, label, sect, shover = _global_cells(buf, drawn, rows)
    multi = tr.warp is None
    ticks = [(f"w{w} · " if multi else "") + f"{buf.name} {ln * LINE - buf.start:+,} B" for w, ln in rows]
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=sect, text=shover, hoverinfo="text", colorscale=[[0, "#d9d9d9"], [1, "#d9d9d9"]],
                             showscale=False, xgap=0, ygap=3, name="sectors moved"))
    fig.add_trace(go.Heatmap(z=lane, text=label, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                             texttemplate="%{text}", textfont=dict(size=9), colorscale="Turbo",
                             zmin=0, zmax=31, ygap=3, name="lanes",
                             colorbar=dict(title=dict(text="lane"), tickvals=[0, 8, 16, 24, 31], len=0.9,
                                           thickness=14)))
    for x in (31.5, 63.5, 95.5):
        fig.add_vline(x=x, line=dict(color="#555555", width=1, dash="dot"))
    head, sub = _global_title(tr, buf, drawn, k, n)
    notes = ["Each cell is one byte, coloured by the lane that requested it; grey: the rest of the 32-byte sectors "
             "the request touched, moved but not used. Counted as wb.profile counts: L1 sectors, nothing cached."]
    if more > 0:
        notes.append(f"{more} more 128-byte line{'s' if more != 1 else ''} touched, not drawn.")
    notes += _dropped_note(tr)
    plots._finish(fig, head, sub, notes, None)
    fig.update_xaxes(title_text="byte in the 128-byte line (dotted: 32-byte sector boundaries)", range=[-0.5, 127.5],
                     tickvals=[0, 16, 32, 48, 64, 80, 96, 112, 127], showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=ticks, autorange="reversed", showgrid=False,
                     zeroline=False, title_text="128-byte line (offset from " + buf.name + ")")
    _fit_height(fig, len(rows), 24)
    return fig


def _dropped_note(tr: LaunchTrace) -> list[str]:
    if not tr.dropped:
        return []
    return [f"The trace was full: {tr.dropped:,} later accesses of the block were dropped, so the counts drawn miss "
            "them (trace one warp rather than warp='all', or a smaller problem)."]


def _fit_height(fig: go.Figure, rows: int, px: int) -> None:
    m = fig.layout.margin
    fig.update_layout(height=int(m.t + m.b + max(150, rows * px) + 20), margin=dict(l=150))


def _shared_cells(drawn: list[Request], multi: bool) -> tuple:
    """Return the bank map's (lane, hover, label) matrices and row names: a row per wavefront of each phase."""
    nan = float("nan")
    lane, hover, label, names = [], [], [], []
    for r in drawn:
        phases, per_phase = r.bank_phases(), r.lanes_per_phase
        for p, banks in phases.items():
            waves = max(len(ws) for ws in banks.values())
            for j in range(waves):
                zr, hr, lr = [nan] * BANKS, [""] * BANKS, [""] * BANKS
                for b, ws in banks.items():
                    if j >= len(ws):
                        continue
                    accs = [a for a in r.accesses if a.lane // per_phase == p and a.addr // 4 <= ws[j]
                            <= (a.addr + max(a.size, 1) - 1) // 4]
                    a = accs[0]
                    zr[b] = a.lane
                    lr[b] = str(a.lane) if len(accs) == 1 else f"×{len(accs)}"
                    hr[b] = (f"bank {b}: word {ws[j]} of the window ({a.buffer} + {ws[j] * 4 - (a.addr - a.offset)} B)"
                             f"<br>{_lanes_text(accs)}<br>wavefront {j + 1} of {waves}"
                             + (f" in phase {p}" if len(phases) > 1 else ""))
                lane.append(zr)
                hover.append(hr)
                label.append(lr)
                names.append((f"w{r.warp} · " if multi else "") + (f"phase {p} · " if len(phases) > 1 else "")
                             + f"wavefront {j + 1}")
    return lane, hover, label, names


def _shared_title(tr: LaunchTrace, buf: TracedBuffer, drawn: list[Request], k: int, n: int) -> tuple[str, str]:
    r = drawn[0]
    phases = len(r.bank_phases())
    if all(d.bank_conflicts == 0 for d in drawn):
        verdict = "conflict-free: " + (f"{r.wavefronts} wavefront" if phases == 1 else
                                       f"{r.wavefronts} wavefronts, one per phase")
    else:
        way = max(len(ws) for d in drawn for banks in d.bank_phases().values() for ws in banks.values())
        verdict = (f"{way}-way bank conflict: {r.wavefronts} wavefronts, {r.bank_conflicts} bank conflicts"
                   if len(drawn) == 1 else f"up to {way}-way bank conflicts")
    head = f"{buf.name} (shared): {verdict} ({_where_text(tr, drawn, k, n)})"
    width = max(a.size for a in r.accesses)
    sub = (f"{phases} phases of {r.lanes_per_phase} lanes ({width}-byte accesses)" if phases > 1
           else f"{len(r.accesses)} lanes, {width}-byte accesses")
    return head, f"{sub} · {tr.kernel} {_site(drawn)}".rstrip()


def _shared_figure(tr: LaunchTrace, buf: TracedBuffer, drawn: list[Request], k: int, n: int) -> go.Figure:
    head, sub = _shared_title(tr, buf, drawn, k, n)
    return bank_map_figure(drawn, head, sub, multi=tr.warp is None, notes=_dropped_note(tr))


def bank_map_figure(drawn: list[Request], head: str, sub: str, *, multi: bool = False,
                    notes: Iterable[str] = ()) -> go.Figure:
    """Return the bank map of shared requests: a column per bank, a row per wavefront (also used by wb.cute)."""
    import plotly.graph_objects as go

    from workbench import plots

    lane, hover, label, names = _shared_cells(drawn, multi)
    more = len(names) - MAX_WAVEFRONT_ROWS
    lane, hover, label, names = (x[:MAX_WAVEFRONT_ROWS] for x in (lane, hover, label, names))
    fig = go.Figure(go.Heatmap(z=lane, text=label, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                               texttemplate="%{text}", textfont=dict(size=9), colorscale="Turbo",
                               zmin=0, zmax=31, xgap=2, ygap=2, name="lanes",
                               colorbar=dict(title=dict(text="lane"), tickvals=[0, 8, 16, 24, 31], len=0.9,
                                             thickness=14)))
    lines = ["A column is a bank (4-byte word w sits in bank w mod 32); a row is one pass through the banks "
             "(wavefront), serving one word per bank to any number of lanes. The tallest column sets the wavefronts: "
             "those beyond one per phase are the bank conflicts wb.profile counts."]
    if more > 0:
        lines.append(f"{more} more wavefront row{'s' if more != 1 else ''} not drawn.")
    lines += list(notes)
    plots._finish(fig, head, sub, lines, None)
    fig.update_xaxes(title_text="bank", range=[-0.5, 31.5], tickvals=list(range(0, 32, 4)) + [31], showgrid=False,
                     zeroline=False)
    fig.update_yaxes(tickvals=list(range(len(names))), ticktext=names, autorange="reversed", showgrid=False,
                     zeroline=False)
    _fit_height(fig, len(names), 22)
    return fig
