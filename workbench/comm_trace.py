"""Trace and fault-inject torch.distributed inside a rank: every call recorded, messages delayed, late or rendezvous.

While a pool job runs (:mod:`workbench.comm_pool`), :func:`installed` replaces the point-to-point functions
(``send``, ``recv``, ``isend``, ``irecv``, ``batch_isend_irecv``) and the collectives of ``torch.distributed`` with
thin wrappers, so code written with plain ``torch.distributed`` is traced without a change. Each wrapper

* records a timeline :class:`Event` (rank, op, peer, bytes, start and end on ``time.perf_counter``'s clock);
* writes what the rank is waiting in (``"send(to 1, 4096 B)"``) to a shared status slot the parent reads when a
  job times out, so a deadlock is reported with every rank's pending call;
* applies the job's :class:`Faults`:

  - ``late``: an ``irecv``'s data lands in the caller's tensor only at ``wait()`` (the tensor is scribbled over
    when the receive is posted), and an ``isend`` reads its buffer only when this rank next blocks (a ``wait()``,
    a blocking send or receive, a collective): as late as a transport can without deadlocking.
    A transport may do either, so code that reads a receive buffer before ``wait()``, or writes a send buffer
    before it, is wrong every time instead of once in a while. ``late_sends`` / ``late_recvs`` apply one half;
    ``recv_fill`` is what a receive buffer holds until its message lands; ``snapshot_sends`` reads each isend's
    buffer at the call (the opposite extreme).
  - ``rendezvous``: a blocking ``send`` (and an ``isend``'s ``wait()``) returns only once the peer has posted the
    matching receive, on every transport alike (an MPI or a socket transport that buffers small messages would
    hide a send/recv order that deadlocks without buffering; gloo in torch 2.13 happens to block already).
  - ``delay_s`` on chosen messages (``delay_messages``: this rank's k-th send; ``delay_to``: every send to those
    peers): the send is posted that much later.
  - ``reorder``: sends deferred by ``late`` go out peer by peer in the reverse order (each peer's own messages
    keep their order, which every transport guarantees).

Matching for ``rendezvous``: the n-th receive rank b posts from rank a matches rank a's n-th send to b (MPI's
non-overtaking rule, tags aside). Receives announce themselves through the job's TCP store.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

#: Bytes of one rank's status slot in the shared array.
SLOT = 160
#: The collectives traced (by their torch.distributed name).
COLLECTIVES = tuple(n for n in ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single",
                                 "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all",
                                 "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier")
                    if hasattr(c10d, n))
P2P = ("send", "recv", "isend", "irecv", "batch_isend_irecv")


@dataclass(frozen=True)
class Faults:
    """A fault plan for the point-to-point messages of a job (see the module docstring)."""

    late: bool = False
    rendezvous: bool = False
    late_sends: bool = False
    late_recvs: bool = False
    recv_fill: float = float("nan")
    snapshot_sends: bool = False
    delay_s: float = 0.0
    delay_messages: tuple[int, ...] = ()
    delay_to: tuple[int, ...] = ()
    reorder: bool = False

    @property
    def defer_sends(self) -> bool:
        return self.late or self.late_sends

    @property
    def land_at_wait(self) -> bool:
        return self.late or self.late_recvs

    def __post_init__(self) -> None:
        if self.delay_s < 0:
            raise ValueError(f"Faults: delay_s must be >= 0, got {self.delay_s}")
        if (self.delay_messages or self.delay_to) and self.delay_s == 0:
            raise ValueError("Faults: delay_messages / delay_to need delay_s > 0")
        object.__setattr__(self, "delay_messages", tuple(int(k) for k in self.delay_messages))
        object.__setattr__(self, "delay_to", tuple(int(p) for p in self.delay_to))

    def describe(self) -> str:
        """Return the plan in a few words ("late, rendezvous")."""
        words = [w for w, on in (("late", self.late), ("late sends", self.late_sends and not self.late),
                                 ("receives land at wait()", self.late_recvs and not self.late),
                                 ("rendezvous", self.rendezvous), ("reorder", self.reorder)) if on]
        if self.delay_messages:
            words.append(f"send #{','.join(map(str, self.delay_messages))} delayed {self.delay_s:g} s")
        if self.delay_to:
            words.append(f"sends to rank {','.join(map(str, self.delay_to))} delayed {self.delay_s:g} s")
        return ", ".join(words) or "no faults"


@dataclass
class Event:
    """One traced call on one rank: ``t_start``/``t_end`` in seconds from the run's start."""

    rank: int
    op: str
    peer: int | None
    bytes: int
    t_start: float
    t_end: float
    note: str = ""

    def as_dict(self) -> dict:
        """Return the event as a plain dict (for tables and plots)."""
        return asdict(self)


def nbytes(t: Any) -> int:
    """Return the bytes of a tensor, or of every tensor in a list of them (0 for anything else)."""
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if isinstance(t, (list, tuple)):
        return sum(nbytes(x) for x in t)
    return 0


def scribble_(t: torch.Tensor, fill: float = float("nan")) -> None:
    """Overwrite a receive buffer with ``fill`` (NaN by default; -1 for integers) until the message lands."""
    if t.is_floating_point() or t.is_complex():
        t.fill_(fill)
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-1)


# --------------------------------------------------------------------------------------------------- the status


class Status:
    """Write this rank's current call into its slot of the shared status array (read by the parent on a timeout)."""

    def __init__(self, array: Any, slot: int) -> None:
        self.array, self.slot = array, slot
        self.context = ""

    def set(self, text: str) -> None:
        if self.array is None:
            return
        raw = (f"{text} [{self.context}]" if self.context and text else text).encode()[:SLOT - 1]
        ctypes.memmove(ctypes.addressof(self.array) + self.slot * SLOT, raw + b"\0", len(raw) + 1)


def read_status(array: Any, slot: int) -> str:
    """Return the text in ``slot`` of a status array."""
    raw = bytes(array[slot * SLOT:(slot + 1) * SLOT])
    return raw.split(b"\0", 1)[0].decode(errors="replace")


# --------------------------------------------------------------------------------------------------- handles


class _Handle:
    """What a traced async call returns: ``wait()`` is traced, the rest is the torch Work's."""

    def __init__(self, tracer: Tracer, op: str, peer: int | None, size: int) -> None:
        self.tracer, self.op, self.peer, self.size = tracer, op, peer, size
        self.work: Any = None
        self.done = False

    def _finish(self) -> None:
        if self.work is not None:
            self.work.wait()

    def wait(self, timeout: Any = None) -> bool:
        """Wait for the message (recorded as a "wait" event); return True like torch's Work.wait."""
        if self.done:
            return True
        tr = self.tracer
        tr.flush()
        with tr.call("wait", self.peer, self.size, f"wait({self.what()})", note=self.op):
            self._finish()
        self.done = True
        return True

    def is_completed(self) -> bool:
        return self.done or (self.work is not None and not isinstance(self, _LateRecv) and self.work.is_completed())

    def what(self) -> str:
        arrow = "to" if self.op in ("isend", "send") else "from"
        peer = f"{arrow} {self.peer}, " if self.peer is not None and self.peer >= 0 else ""
        return f"{self.op} {peer}{self.size} B"

    def __getattr__(self, name: str) -> Any:
        if name == "work":
            raise AttributeError(name)
        return getattr(self.work, name)


class _Send(_Handle):
    def __init__(self, tracer: Tracer, tensor: torch.Tensor, dst: int, group: Any, tag: int, seq: int) -> None:
        super().__init__(tracer, "isend", dst, nbytes(tensor))
        self.tensor, self.group, self.tag, self.seq = tensor, group, tag, seq
        self.seq_global = 0

    def post(self) -> None:
        if self.work is None:
            self.tracer.delay(self.seq_global, self.peer)
            self.work = self.tracer.orig["isend"](self.tensor, self.peer, self.group, self.tag)

    def _finish(self) -> None:
        self.post()
        self.work.wait()
        self.tracer.rendezvous(self.peer, self.seq)


class _LateRecv(_Handle):
    def __init__(self, tracer: Tracer, tensor: torch.Tensor, src: int, work: Any, buf: torch.Tensor) -> None:
        super().__init__(tracer, "irecv", src, nbytes(tensor))
        self.tensor, self.work, self.buf = tensor, work, buf

    def _finish(self) -> None:
        self.work.wait()
        self.tensor.copy_(self.buf)  # the message lands now, not before


class _Collective(_Handle):
    pass


# --------------------------------------------------------------------------------------------------- the tracer


@dataclass
class Tracer:
    """The wrappers' state on one rank during one job."""

    rank: int
    world: int
    faults: Faults = field(default_factory=Faults)
    store: Any = None
    status: Status | None = None
    t0: float = field(default_factory=time.perf_counter)
    record: bool = True
    timeout_s: float = 60.0
    events: list[Event] = field(default_factory=list)
    orig: dict[str, Callable] = field(default_factory=dict)
    _pending: list[_Send] = field(default_factory=list)
    _sent: dict[int, int] = field(default_factory=dict)  # messages posted per destination
    _received: dict[int, int] = field(default_factory=dict)  # receives posted per source
    _n_sends: int = 0
    _handles: list[_Handle] = field(default_factory=list)

    # ------------------------------------------------------------------ bookkeeping
    @contextlib.contextmanager
    def call(self, op: str, peer: int | None, size: int, waiting: str, note: str = "") -> Iterator[None]:
        """Record one call as an event and show ``waiting`` in the status slot while it runs."""
        if self.status is not None:
            self.status.set(waiting)
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            if self.status is not None:
                self.status.set("")
            if self.record:
                self.events.append(Event(self.rank, op, peer, int(size), start - self.t0, end - self.t0, note))

    def add(self, op: str, start: float, end: float, note: str = "", peer: int | None = None, size: int = 0) -> None:
        """Record an event the rank's own code marks (compute spans, labels)."""
        if self.record:
            self.events.append(Event(self.rank, op, peer, size, start - self.t0, end - self.t0, note))

    def delay(self, seq_global: int, peer: int) -> None:
        f = self.faults
        if f.delay_s and (seq_global in f.delay_messages or peer in f.delay_to):
            time.sleep(f.delay_s)

    def flush(self) -> None:
        """Post the sends that ``late`` deferred; under ``reorder`` the peers' turns are reversed.

        Messages to one peer keep their order (torch.distributed, NCCL and MPI all guarantee it, so correct code
        may rely on it); what changes is which peer's messages go out first.
        """
        if not self._pending:
            return
        todo, self._pending = self._pending, []
        if self.faults.reorder:
            peers = list(dict.fromkeys(h.peer for h in reversed(todo)))
            todo = [h for p in peers for h in todo if h.peer == p]
        for h in todo:
            h.post()

    def settle(self) -> None:
        """Complete what the rank's code left in flight (sends posted, works waited) without landing late data."""
        self.flush()
        for h in self._handles:
            if not h.done and h.work is not None:
                h.work.wait()
        self._handles.clear()

    def rendezvous(self, dst: int, seq: int) -> None:
        """Under ``rendezvous``: block until ``dst`` has posted the receive matching this rank's send ``seq``."""
        if not self.faults.rendezvous or self.store is None or dst == self.rank:
            return
        self.store.wait([f"rv/{self.rank}/{dst}/{seq}"], datetime.timedelta(seconds=self.timeout_s))

    def _announce(self, src: int) -> None:
        n = self._received.get(src, 0)
        self._received[src] = n + 1
        if self.faults.rendezvous and self.store is not None:
            self.store.set(f"rv/{src}/{self.rank}/{n}", "1")

    # ------------------------------------------------------------------ point to point
    def isend(self, tensor: torch.Tensor, dst: int | None = None, group: Any = None, tag: int = 0,
              **kw: Any) -> _Send:
        dst = _peer(dst, kw, "group_dst", group)
        seq = self._sent.get(dst, 0)
        self._sent[dst] = seq + 1
        if self.faults.snapshot_sends and not self.faults.defer_sends:
            tensor = tensor.clone()  # the buffer is read now, whatever the caller does with it afterwards
        h = _Send(self, tensor, dst, group, tag, seq)
        h.seq_global = self._n_sends
        self._n_sends += 1
        self._handles.append(h)
        with self.call("isend", dst, h.size, f"isend(to {dst}, {h.size} B)"):
            if self.faults.defer_sends:
                self._pending.append(h)
            else:
                self.delay(h.seq_global, dst)
                h.work = self.orig["isend"](tensor, dst, group, tag)
        return h

    def send(self, tensor: torch.Tensor, dst: int | None = None, group: Any = None, tag: int = 0, **kw: Any) -> None:
        dst = _peer(dst, kw, "group_dst", group)
        self.flush()
        seq = self._sent.get(dst, 0)
        self._sent[dst] = seq + 1
        size = nbytes(tensor)
        with self.call("send", dst, size, f"send(to {dst}, {size} B)"):
            self.delay(self._n_sends, dst)
            self._n_sends += 1
            self.orig["isend"](tensor, dst, group, tag).wait()
            self.rendezvous(dst, seq)

    def irecv(self, tensor: torch.Tensor, src: int | None = None, group: Any = None, tag: int = 0,
              **kw: Any) -> _Handle:
        src = _peer(src, kw, "group_src", group)
        size = nbytes(tensor)
        with self.call("irecv", src, size, f"irecv(from {src}, {size} B)"):
            if self.faults.land_at_wait:
                buf = torch.empty_like(tensor)
                work = self.orig["irecv"](buf, src, group, tag)
                scribble_(tensor, self.faults.recv_fill)
                h: _Handle = _LateRecv(self, tensor, src, work, buf)
            else:
                h = _Handle(self, "irecv", src, size)
                h.work = self.orig["irecv"](tensor, src, group, tag)
            self._announce(src)
        self._handles.append(h)
        return h

    def recv(self, tensor: torch.Tensor, src: int | None = None, group: Any = None, tag: int = 0,
             **kw: Any) -> int:
        src = _peer(src, kw, "group_src", group)
        self.flush()
        size = nbytes(tensor)
        with self.call("recv", src, size, f"recv(from {src}, {size} B)"):
            work = self.orig["irecv"](tensor, src, group, tag)
            self._announce(src)
            work.wait()
        return src

    def batch_isend_irecv(self, ops: list) -> list[_Handle]:
        out = []
        for p in ops:
            fn = self.irecv if p.op in (self.irecv_wrapper, self.orig["irecv"]) else self.isend
            out.append(fn(p.tensor, p.peer, p.group, p.tag))
        return out

    # ------------------------------------------------------------------ collectives
    def collective(self, name: str) -> Callable:
        orig = self.orig[name]

        def traced(*args: Any, **kw: Any) -> Any:
            self.flush()
            size = nbytes(args[0]) if args else nbytes(kw.get("tensor", kw.get("output")))
            if name.startswith(("all_gather", "all_to_all")) and len(args) > 1:
                size = nbytes(args[1])  # what this rank contributes
            with self.call(name, -1, size, f"{name}({size} B)"):
                work = orig(*args, **kw)
            if kw.get("async_op") and work is not None:
                h = _Collective(self, name, -1, size)
                h.work = work
                self._handles.append(h)
                return h
            return work

        traced.__name__ = name
        traced.__doc__ = orig.__doc__
        return traced


def _peer(peer: int | None, kw: dict, key: str, group: Any) -> int:
    """Return the global peer rank of a p2p call (``dst``/``src``, or ``group_dst``/``group_src`` in ``group``)."""
    if peer is None and kw.get(key) is not None:
        peer = dist.get_global_rank(group, kw[key]) if group is not None else kw[key]
    if peer is None:
        raise ValueError("traced point-to-point calls need an explicit peer rank (receive from any source is not "
                         "supported by the workbench's tracer)")
    return int(peer)


@contextlib.contextmanager
def installed(tracer: Tracer) -> Iterator[Tracer]:
    """Replace torch.distributed's p2p functions and collectives by ``tracer``'s wrappers inside this block."""
    saved: list[tuple[Any, str, Any]] = []
    for name in (*P2P, *COLLECTIVES):
        tracer.orig[name] = getattr(c10d, name)
    wrappers: dict[str, Callable] = {n: getattr(tracer, n) for n in P2P}
    wrappers.update({n: tracer.collective(n) for n in COLLECTIVES})
    tracer.irecv_wrapper = wrappers["irecv"]
    for mod in (dist, c10d):
        for name, fn in wrappers.items():
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, fn)
    _set_current(tracer)
    try:
        yield tracer
    finally:
        _set_current(None)
        for mod, name, fn in reversed(saved):
            setattr(mod, name, fn)


_CURRENT: list[Tracer | None] = [None]


def _set_current(t: Tracer | None) -> None:
    _CURRENT[0] = t


def current() -> Tracer | None:
    """Return the tracer of the job running on this rank, or None outside a traced job."""
    return _CURRENT[0]
