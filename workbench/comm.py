"""Run a function on ranks of torch.distributed and get what each returned and a timeline of every call.

::

    from workbench import comm
    run = comm.run(my_fn, 3, x)       # my_fn(rank, world, device, x) on 3 ranks of a fresh process group
    run.results                        # what each rank returned, in rank order
    run.events                         # every send, recv, wait and collective: rank, op, peer, bytes, start, end

In cpu mode the ranks are processes of a persistent pool (:mod:`workbench.comm_pool`: started once, reused by every
job) talking over gloo on this machine; their times are wall times of this CPU, not of any GPU interconnect. On
GPUs the same rank functions run under ``torchrun`` with NCCL (``benchmarks/comm_busbw.py``).

Inside a rank, code uses plain ``torch.distributed`` (``dist.isend``, ``dist.all_reduce``...): the tracer
(:mod:`workbench.comm_trace`) records each call and applies the job's fault plan (:class:`Faults`). Mark your own
compute on the timeline with :func:`span`. A deadlock or a missing peer raises :class:`CommTimeout` within
``timeout_s``, naming every unfinished rank and the call it waits in; an exception in a rank raises
:class:`RankError` with that rank's traceback.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from workbench.comm_pool import MAX_WORLD, CommTimeout, RankError, pool
from workbench.comm_trace import Event, Faults, current

__all__ = ["MAX_WORLD", "CommTimeout", "Event", "Faults", "RankError", "Run", "events_table", "mark", "run", "span",
           "where"]

#: How cpu-mode times are labelled wherever they are shown.
WHERE_CPU = "gloo on this CPU (processes on one machine; emulated wall time, not a GPU interconnect)"


@dataclass
class Run:
    """What :func:`run` returns: each rank's result, the timeline events and the job's wall time."""

    results: list[Any]
    events: list[Event]
    wall_s: float
    world: int
    backend: str = "gloo"

    @property
    def where(self) -> str:
        """Say what the times were measured on."""
        return WHERE_CPU if self.backend == "gloo" else f"{self.backend} on this machine's GPUs"


def run(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 60.0, faults: Faults | None = None,
        trace: bool = True, label: str | None = None) -> Run:
    """Run ``fn(rank, world, device, *args)`` on ``world`` ranks (1..5) of a fresh process group; return a :class:`Run`.

    ``fn`` is a module-level function, or one defined in a notebook cell (sent by source with the modules and
    values it names). ``args`` are picklable (tensors included). ``faults`` applies a fault plan to every rank's
    messages; ``trace=False`` records no events (the status of each rank is still kept for timeouts).
    Raises :class:`CommTimeout` past ``timeout_s`` (every unfinished rank and the call it waits in) and
    :class:`RankError` when a rank raises.
    """
    name = label or getattr(fn, "__name__", "fn")
    results, events, wall = pool().run(fn, world, args, faults=faults, trace=trace, timeout_s=timeout_s, label=name)
    return Run(results=results, events=[Event(**e) for e in events], wall_s=wall, world=world)


@contextlib.contextmanager
def span(op: str = "compute", note: str = "") -> Iterator[None]:
    """Record the block as one timeline event ``op`` of this rank (inside a :func:`run` job; a no-op elsewhere)."""
    tr = current()
    start = time.perf_counter()
    try:
        yield
    finally:
        if tr is not None:
            tr.add(op, start, time.perf_counter(), note)


def mark(note: str) -> None:
    """Record a zero-length event ``"mark"`` with ``note`` on this rank's timeline."""
    tr = current()
    if tr is not None:
        t = time.perf_counter()
        tr.add("mark", t, t, note)


def where() -> str:
    """Return what cpu-mode communication times measure (for plot titles and tables)."""
    return WHERE_CPU


def events_table(events: list[Event]) -> list[dict]:
    """Return the events as plain dicts (rank, op, peer, bytes, t_start, t_end, note), sorted by start time."""
    return [e.as_dict() for e in sorted(events, key=lambda e: (e.t_start, e.rank))]


def close() -> None:
    """Stop this process's rank pool (it starts again on the next :func:`run`)."""
    from workbench import comm_pool

    if comm_pool._POOL[0] is not None:
        comm_pool._POOL[0].close()
        comm_pool._POOL[0] = None


def stats() -> dict:
    """Return the pool's counters: jobs run and processes started (respawns included)."""
    p = pool()
    alive = sum(1 for x in p.procs if x is not None and x.is_alive())
    return {"jobs": p.jobs_run, "started": p.started, "alive": alive}
