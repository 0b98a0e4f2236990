"""Run a function on ``world`` spawned ranks of a ``torch.distributed`` group and gather what each rank returns.

The harness a communication check needs, whatever it communicates (all-to-all for expert parallelism,
all-reduce, all-gather...)::

    reports = run_ranks(my_rank_fn, 2, cfg)   # my_rank_fn(rank, world, device, cfg) -> a report, on each rank

It owns the parts every such check shares:

* **processes**: ``world`` processes started with ``spawn`` (fork is unsafe with threads and CUDA; spawn works in
  Jupyter). The rank function must be a module-level function, spawn pickles it by name; a script calling
  :func:`run_ranks` must do so under ``if __name__ == "__main__":`` because the ranks re-import it.
* **rendezvous**: the caller binds a TCP store on a port the OS picks and keeps it open, so nothing can take the
  port before the ranks join it (what ``MASTER_ADDR:MASTER_PORT`` names with torchrun).
* **backend**: NCCL with one GPU per rank when ``world`` GPUs are present, else gloo on the CPU (:func:`pick_backend`).
* **results**: each rank's report (dicts, lists, numbers, tensors) comes back through a queue as bytes, see
  :func:`to_bytes`.
* **failures**: a rank's traceback is re-raised in the caller as a RuntimeError; a rank that dies without a word
  (killed, a segfault, out of memory) raises with the ranks' stderr; past ``timeout_s`` every rank is killed and a
  TimeoutError names the ranks that did not finish (a hung collective).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import queue as queue_mod
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist


def pick_backend(backend: str | None, world: int) -> str:
    """Return ``backend``, or nccl when ``world`` GPUs and NCCL are there, else gloo; refuse what cannot run here."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend is None:
        return "nccl" if gpus >= world and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        if not dist.is_nccl_available() or gpus < world:
            raise RuntimeError(f"backend 'nccl' needs {world} GPUs (one per rank) and an NCCL build of torch; "
                               f"this machine has {gpus} GPU(s), NCCL available: {dist.is_nccl_available()}")
    elif backend != "gloo":
        raise ValueError(f"backend must be 'gloo', 'nccl' or None (pick), got {backend!r}")
    return backend


# ------------------------------------------------------------------------------------------------------ reports


def to_bytes(obj: Any) -> bytes:
    """Pickle a report (dicts, lists, numbers, tensors) with every tensor as dtype, shape and raw bytes.

    Not a tensor through the queue: torch's queue pickling shares memory that dies with the sending process, and
    the rank exits right after sending. Not ``torch.save`` either: a rank that owns no data has empty tensors,
    and in CI a saved empty storage came back with another storage's bytes ("record size 128 bytes does not match
    expected size 0"). Raw bytes of a contiguous copy have no storages to mix up.
    """
    return pickle.dumps(_walk(obj, _pack), protocol=pickle.HIGHEST_PROTOCOL)


def from_bytes(payload: bytes) -> Any:
    """Rebuild what :func:`to_bytes` packed (the payload comes from our own spawned rank)."""
    return _walk(pickle.loads(payload), _unpack)  # noqa: S301  (our own child process's report)


def _walk(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """Return ``obj`` with ``leaf`` applied to it, or (where ``leaf`` returns it unchanged) to each item inside."""
    out = leaf(obj)
    if out is not obj:
        return out
    if isinstance(obj, dict):
        return {k: _walk(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_walk(v, leaf) for v in obj)
    return obj


def _pack(obj: Any) -> Any:
    """Return a tensor as ("__tensor__", dtype name, shape, raw bytes); anything else as it is."""
    if not isinstance(obj, torch.Tensor):
        return obj
    t = obj.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return "__tensor__", str(t.dtype).removeprefix("torch."), tuple(t.shape), raw


def _unpack(obj: Any) -> Any:
    """Return the tensor :func:`_pack` made ``obj`` from; anything else as it is."""
    if not (isinstance(obj, tuple) and len(obj) == 4 and obj[0] == "__tensor__"):
        return obj
    _, dtype_name, shape, raw = obj
    dtype = getattr(torch, dtype_name)
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


# ------------------------------------------------------------------------------------------------------ a rank


def rank_main(rank: int, world: int, port: int, backend: str, fn: Callable[..., Any], args: tuple, timeout_s: float,
              results: Any) -> None:
    """Join the group at 127.0.0.1:``port``, run ``fn(rank, world, device, *args)`` and put its report on ``results``.

    The entry point of every spawned rank. Anything raised (KeyboardInterrupt included) goes to ``results`` as the
    traceback's text and the process exits with code 1.
    """
    try:
        timeout = datetime.timedelta(seconds=timeout_s)
        if backend == "nccl":
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
        else:
            dev = torch.device("cpu")
        # Each rank joins the parent's TCP store as a client, then the ranks find each other through it.
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout,
                                device_id=dev if dev.type == "cuda" else None)  # NCCL: bind the rank to its GPU
        report = fn(rank, world, dev, *args)
        dist.barrier()
        dist.destroy_process_group()
        results.put(("ok", rank, to_bytes(report)))
    except BaseException:  # noqa: BLE001  (report anything, KeyboardInterrupt included, as text to the parent)
        results.put(("error", rank, traceback.format_exc()))
        raise SystemExit(1) from None


# ------------------------------------------------------------------------------------------------------ the caller


@contextlib.contextmanager
def _stderr_to(f: Any) -> Iterator[None]:
    """Point file descriptor 2 at ``f`` while processes start (they inherit it), then restore it."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _tail(f: Any, n: int = 3000) -> str:
    """Return the last ``n`` characters the ranks wrote to stderr."""
    f.flush()
    f.seek(0)
    text = f.read().decode(errors="replace").strip()
    return text[-n:] if text else "(it wrote nothing to stderr)"


def _collect(procs: list, results: Any, backend: str, timeout_s: float, start: float, errlog: Any,
             label: str) -> dict[int, Any]:
    """Gather every rank's report from the queue; raise on a rank's error, its silent death or the deadline."""
    world, deadline = len(procs), start + timeout_s
    reports: dict[int, Any] = {}
    while len(reports) < world:
        try:
            kind, rank, payload = results.get(timeout=0.2)
        except queue_mod.Empty:
            dead = [r for r, p in enumerate(procs) if r not in reports and p.exitcode not in (None, 0)]
            if dead:  # died without a word (killed, segfault, out of memory): give it a moment to report
                time.sleep(0.5)
                if results.empty():
                    raise RuntimeError(f"{label} rank {dead[0]} exited with code {procs[dead[0]].exitcode} without "
                                       f"reporting; the ranks' stderr:\n{_tail(errlog)}") from None
            if time.perf_counter() > deadline:
                missing = [r for r in range(world) if r not in reports]
                raise TimeoutError(f"{label}: ranks {missing} of {world} did not finish within "
                                   f"{timeout_s:g} s (backend {backend}; a hung collective?): "
                                   "all ranks killed") from None
            continue
        if kind == "error":
            raise RuntimeError(f"{label} rank {rank} of {world} failed (backend {backend}):\n{payload}")
        reports[rank] = from_bytes(payload)  # tensors, lists, numbers
    return reports


def run_ranks(fn: Callable[..., Any], world: int, *args: Any, backend: str | None = None, timeout_s: float = 120.0,
              label: str = "distributed") -> list[Any]:
    """Run ``fn(rank, world, device, *args)`` on ``world`` spawned ranks of one process group; return their reports.

    ``fn`` is a module-level function (spawn pickles it by name) and ``args`` picklable; ``device`` is the rank's
    GPU with NCCL, the CPU with gloo. The reports come back in rank order. ``label`` names the check in errors.
    Raises RuntimeError with a rank's traceback if it fails, and TimeoutError (after killing every rank) if the
    group has not finished within ``timeout_s`` seconds.
    """
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    backend = pick_backend(backend, world)
    # Port 0: the OS picks a free one; the store stays bound until every rank has reported.
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout_s))
    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start = time.perf_counter()
    procs = [ctx.Process(target=rank_main, args=(r, world, store.port, backend, fn, args, timeout_s, results),
                         daemon=True, name=f"{label}-rank{r}") for r in range(world)]
    errlog = tempfile.TemporaryFile()  # the ranks' stderr: shown if one dies before it can report
    try:
        with _stderr_to(errlog):
            for p in procs:
                p.start()
        reports = _collect(procs, results, backend, timeout_s, start, errlog, label)
        for p in procs:
            p.join(timeout=10)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        results.close()
        errlog.close()
        del store
    return [reports[r] for r in range(world)]
