"""The persistent rank pool: up to five rank processes started once per Python process and reused by every job.

Importing torch costs seconds per process, and a check runs dozens of small jobs at world sizes 1 to 5, so the
ranks are started once (lazily, as a job first needs them) and kept. Each job runs on ranks 0..world-1 in a fresh
process group of size ``world``: the parent binds a new TCP store (the OS picks the port), each rank joins it,
runs ``fn(rank, world, device, *args)`` under the tracer (:mod:`workbench.comm_trace`), and leaves the group
(``destroy_process_group``). Ranks past ``world`` stay idle.

Processes come from the ``forkserver`` start method with torch preloaded: the server imports torch once and forks
each rank from it, so a rank starts in a fraction of a second instead of paying the import again (``spawn`` where
forkserver is missing). They talk to the parent over one pipe each; what each is waiting in sits in a shared status
array the parent reads when a job runs past its time limit. A job that times out (a deadlock, a missing peer) gets
its ranks killed and replaced on the next job; a job whose function raises on every rank leaves the pool as it was.

Functions reach the ranks by reference when they are importable (module-level functions of a module) and by source
otherwise (a function defined in a notebook cell or in ``__main__``, which a new process cannot import): the source
is re-executed in the rank with the modules, constants and ``__main__`` functions it names (see :func:`ship`).
"""

from __future__ import annotations

import ast
import builtins
import datetime
import importlib
import inspect
import multiprocessing as mp
import pickle
import textwrap
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_any
from typing import Any

import torch
import torch.distributed as dist

from workbench import comm_trace
from workbench.comm_trace import Faults, Tracer, read_status
from workbench.distributed import from_bytes, to_bytes

#: The most ranks a cpu-mode job takes.
MAX_WORLD = 5
#: Extra seconds a job's ranks may take to start and join the group before the time limit starts counting.
JOIN_LIMIT_S = 60.0


class CommTimeout(TimeoutError):
    """A job ran past its time limit: ``waits`` maps each unfinished rank to the call it was waiting in."""

    def __init__(self, message: str, waits: dict[int, str]) -> None:
        super().__init__(message)
        self.waits = waits


class PeerLeft(RuntimeError):
    """A rank finished its function but a peer left the group before the end-of-job barrier."""


class RankError(RuntimeError):
    """A rank's function raised: ``rank`` and the traceback's text (``remote``) say where."""

    def __init__(self, message: str, rank: int, remote: str) -> None:
        super().__init__(message)
        self.rank, self.remote = rank, remote


# ------------------------------------------------------------------------------------------------ shipping code


def ship(fn: Callable) -> tuple:
    """Return a picklable description of ``fn``: ("ref", module, qualname) or ("source", name, source, globals)."""
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if mod and mod not in ("__main__", "__mp_main__") and "<locals>" not in qual:
        try:
            obj = importlib.import_module(mod)
            for part in qual.split("."):
                obj = getattr(obj, part)
            if obj is fn or getattr(obj, "fn", None) is fn:
                return ("ref", mod, qual)
        except (ImportError, AttributeError):
            pass
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"cannot send {fn!r} to the ranks: pass a function (def ...) or a registered variant")
    return ("source", fn.__name__, _source(fn), _globals_of(fn, depth=0))


def _source(fn: types.FunctionType) -> str:
    """Return ``fn``'s source without decorators (a notebook's @register must not run again in the rank)."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise TypeError(f"cannot send {fn.__name__} to the ranks: its source is not available ({e}); define it in a "
                        "file or a notebook cell") from None
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            node.decorator_list = []
            return ast.unparse(node)
    raise TypeError(f"cannot send {fn.__name__} to the ranks: no 'def {fn.__name__}' in its source (a lambda?)")


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _globals_of(fn: types.FunctionType, depth: int) -> dict[str, tuple]:
    """Return the globals ``fn`` names, each as ("module", name), ("fn", shipped) or ("value", pickled bytes)."""
    out: dict[str, tuple] = {}
    for name in sorted(_names(fn.__code__)):
        if name not in fn.__globals__ or hasattr(builtins, name):
            continue
        val = fn.__globals__[name]
        if isinstance(val, types.ModuleType):
            out[name] = ("module", val.__name__)
        elif isinstance(val, types.FunctionType) and val is not fn and depth < 3:
            try:
                sub = ship(val) if val.__module__ not in ("__main__", "__mp_main__") else \
                    ("source", val.__name__, _source(val), _globals_of(val, depth + 1))
            except TypeError:
                continue
            out[name] = ("fn", sub)
        else:
            try:
                out[name] = ("value", pickle.dumps(val))
            except Exception:  # noqa: BLE001  (an unpicklable global is left out; the rank raises NameError if used)
                continue
    return out


def unship(spec: tuple) -> Callable:
    """Rebuild the function :func:`ship` described (in a rank)."""
    if spec[0] == "ref":
        obj: Any = importlib.import_module(spec[1])
        for part in spec[2].split("."):
            obj = getattr(obj, part)
        return obj
    _, name, source, globs = spec
    ns: dict[str, Any] = {"__name__": "__learner__", "torch": torch, "dist": dist}
    for gname, (kind, val) in globs.items():
        if kind == "module":
            ns[gname] = importlib.import_module(val)
        elif kind == "fn":
            ns[gname] = unship(val)
        else:
            ns[gname] = pickle.loads(val)  # noqa: S301  (pickled by our own parent process)
    exec(compile(source, f"<shipped {name}>", "exec"), ns)  # noqa: S102  (the caller's own function)
    return ns[name]


# ------------------------------------------------------------------------------------------------ a rank


@dataclass
class Job:
    """One job for one rank: run ``fn`` in a fresh group of ``world`` ranks joined at 127.0.0.1:``port``."""

    world: int
    job_id: int
    fn: tuple
    args: bytes  # to_bytes(args)
    faults: Faults = field(default_factory=Faults)
    trace: bool = True
    timeout_s: float = 60.0
    label: str = ""
    backend: str = "gloo"


def _rank_loop(slot: int, conn: Any, status: Any, port: int) -> None:
    """The body of a pool process: run jobs from ``conn`` until the pipe closes."""
    torch.set_num_threads(1)
    st = comm_trace.Status(status, slot)
    # One connection to the pool's store for the process's life: a new TCP store client costs 5 s now and then
    # (a connect retry), so each job works under its own key prefix of this one instead.
    store = dist.TCPStore("127.0.0.1", port, None, is_master=False, timeout=datetime.timedelta(seconds=120))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        try:
            reply = ("ok", _run_job(slot, job, st, dist.PrefixStore(f"job{job.job_id}/", store)))
        except BaseException:  # noqa: BLE001  (anything a rank raises goes to the parent as text)
            reply = ("error", traceback.format_exc())
        st.set("")
        try:
            conn.send_bytes(to_bytes(reply))
        except (EOFError, OSError):
            return


def _run_job(rank: int, job: Job, st: comm_trace.Status, store: Any) -> dict:
    """Join the job's group, run its function under the tracer and leave the group; return the result and events."""
    # The parent kills the job at its time limit, counted from the join; the group's own timeouts are a backstop
    # set well past it, so a hung call is reported by the parent (naming each rank's call), not raised in a rank.
    backstop_s = 2 * job.timeout_s + 5
    timeout = datetime.timedelta(seconds=backstop_s)
    st.context = job.label
    st.set("joining the group")
    dist.init_process_group(job.backend, store=store, rank=rank, world_size=job.world, timeout=timeout)
    try:
        fn = unship(job.fn)
        args = from_bytes(job.args)
        tracer = Tracer(rank=rank, world=job.world, faults=job.faults, store=store, status=st, record=job.trace,
                        timeout_s=backstop_s)
        dev = torch.device("cpu")
        st.set("running")
        with comm_trace.installed(tracer):
            tracer.t0 = _common_start(store, rank, job.world)
            out = fn(rank, job.world, dev, *args)
            tracer.settle()
        st.set("barrier at the end of the job")
        try:
            dist.barrier()
        except Exception as e:  # a peer failed in its function and left the group: its error is the one to report
            raise PeerLeft(f"rank {rank}: the end-of-job barrier failed (a peer left the group): {e}") from None
    finally:
        dist.destroy_process_group()
    return {"out": out, "events": [e.as_dict() for e in tracer.events]}


def _common_start(store: Any, rank: int, world: int) -> float:
    """Return one start time for every rank's events: rank 0's clock once all ranks are ready (one machine)."""
    store.add("ready", 1)
    while int(store.add("ready", 0)) < world:
        time.sleep(0.0005)
    if rank == 0:
        store.set("t0", repr(time.perf_counter()))
    return float(store.get("t0").decode())


# ------------------------------------------------------------------------------------------------ the pool


def _context() -> Any:
    """Return the forkserver context with torch preloaded (spawn where forkserver is missing)."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:
        return mp.get_context("spawn")
    ctx.set_forkserver_preload(["workbench.comm_pool"])
    return ctx


class Pool:
    """Up to :data:`MAX_WORLD` rank processes, started as jobs need them and reused; see the module docstring."""

    def __init__(self, size: int = MAX_WORLD) -> None:
        self.size = size
        self.ctx = _context()
        self.status = self.ctx.RawArray("c", size * comm_trace.SLOT)
        self.procs: list[Any] = [None] * size
        self.conns: list[Any] = [None] * size
        self.jobs_run = 0
        self.started = 0  # processes started over the pool's life (respawns included)
        # The store every job's group meets in (each job under its own key prefix); it lives as long as the pool.
        self.store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=120))

    def _ensure(self, n: int) -> None:
        for slot in range(n):
            p = self.procs[slot]
            if p is not None and p.is_alive():
                continue
            self._drop(slot)
            parent, child = self.ctx.Pipe(duplex=True)
            p = self.ctx.Process(target=_rank_loop, args=(slot, child, self.status, self.store.port), daemon=True,
                                 name=f"workbench-rank{slot}")
            p.start()
            child.close()
            self.procs[slot], self.conns[slot] = p, parent
            self.started += 1

    def _drop(self, slot: int) -> None:
        p, c = self.procs[slot], self.conns[slot]
        if p is not None and p.is_alive():
            p.kill()
            p.join(timeout=5)
        if c is not None:
            c.close()
        self.procs[slot] = self.conns[slot] = None

    def close(self) -> None:
        """Stop every rank process."""
        for slot in range(self.size):
            c = self.conns[slot]
            if c is not None:
                try:
                    c.send(None)
                except (OSError, EOFError):
                    pass
            p = self.procs[slot]
            if p is not None:
                p.join(timeout=2)
            self._drop(slot)

    def run(self, fn: Callable, world: int, args: tuple = (), *, faults: Faults | None = None, trace: bool = True,
            timeout_s: float = 60.0, label: str = "comm") -> tuple[list[Any], list[dict], float]:
        """Run ``fn(rank, world, device, *args)`` on ranks 0..world-1; return (results, events, wall seconds)."""
        if not isinstance(world, int) or not 1 <= world <= self.size:
            raise ValueError(f"{label}: world must be an int in 1..{self.size} (the pool's ranks), got {world!r}")
        shipped = ship(fn)
        payload = to_bytes(tuple(args))
        self._ensure(world)
        job = Job(world=world, job_id=self.jobs_run, fn=shipped, args=payload, faults=faults or Faults(), trace=trace,
                  timeout_s=timeout_s, label=label)
        start = time.perf_counter()
        for slot in range(world):
            comm_trace.Status(self.status, slot).set("waiting for the job")
            self.conns[slot].send(job)
        self.jobs_run += 1
        replies = self._collect(world, start + timeout_s, label, timeout_s)
        results = [r["out"] for r in replies]
        events = sorted((e for r in replies for e in r["events"]), key=lambda e: (e["t_start"], e["rank"]))
        return results, events, time.perf_counter() - start

    def _collect(self, world: int, deadline: float, label: str, timeout_s: float) -> list[dict]:
        replies: dict[int, Any] = {}
        errors: dict[int, str] = {}
        grace: float | None = None
        join_by = deadline + JOIN_LIMIT_S  # the most the ranks may take to start and join the group
        joined = False  # once every rank has joined, the time limit counts from then
        while len(replies) + len(errors) < world:
            waiting = {self.conns[s]: s for s in range(world) if s not in replies and s not in errors}
            if not joined and not self._starting(waiting.values()):
                joined = True
                deadline = max(deadline, time.perf_counter() + timeout_s)
            limit = deadline if grace is None else min(deadline, grace)
            if not joined:
                limit = min(limit, time.perf_counter() + 0.05)  # look again soon: the clock starts at the join
            ready = wait_any(list(waiting), timeout=max(0.0, limit - time.perf_counter()))
            if not ready:
                now = time.perf_counter()
                if grace is not None and now >= grace:
                    break  # a rank failed and the others are stuck waiting for it
                if (not joined and now < join_by) or (joined and now < deadline):
                    continue
                self._timeout(world, replies, errors, label, timeout_s)
            for c in ready:
                slot = waiting[c]
                try:
                    kind, body = from_bytes(c.recv_bytes())
                except (EOFError, OSError) as e:
                    code = self.procs[slot].exitcode if self.procs[slot] is not None else None
                    errors[slot] = f"rank {slot} died without a word (exit code {code}; {type(e).__name__}: {e})"
                    self._drop(slot)
                    continue
                if kind == "ok":
                    replies[slot] = body
                else:
                    errors[slot] = body
                    grace = time.perf_counter() + 2.0
        if errors:
            for s in range(world):  # ranks still blocked on the failed one: replace them
                if s not in replies and s not in errors:
                    self._drop(s)
            # the rank whose function failed, not one that merely saw it leave the group
            rank = min(errors, key=lambda r: ("PeerLeft" in errors[r] or "closed by peer" in errors[r], r))
            raise RankError(f"{label}, world {world}: rank {rank} failed:\n{errors[rank]}", rank, errors[rank])
        return [replies[s] for s in range(world)]

    def _starting(self, slots: Any) -> bool:
        """True while one of ``slots`` is still starting or joining the group (a loaded machine is slow at it)."""
        return any(read_status(self.status, s).startswith(("joining", "waiting for the job")) for s in slots)

    def _timeout(self, world: int, replies: dict, errors: dict, label: str, timeout_s: float) -> None:
        waits = {s: read_status(self.status, s) or "running (no communication call)"
                 for s in range(world) if s not in replies and s not in errors}
        for s in waits:
            self._drop(s)
        done = [s for s in range(world) if s in replies]
        parts = [f"rank {s} waits in {w}" for s, w in waits.items()]
        tail = f"; ranks {done} finished" if done else ""
        raise CommTimeout(f"{label}, world {world}: timed out after {timeout_s:g} s; " + "; ".join(parts) + tail
                          + " (a deadlock or a missing peer: the ranks were killed and are replaced on the next job)",
                          waits)


_POOL: list[Pool | None] = [None]


def pool() -> Pool:
    """Return this Python process's rank pool (created on first use; its ranks start as jobs need them)."""
    if _POOL[0] is None or _POOL[0].ctx is None:
        _POOL[0] = Pool()
    return _POOL[0]

