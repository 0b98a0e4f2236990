"""Time a collective on the rank pool: per message size, the slowest rank's median, then algbw and busbw.

::

    from workbench.comm_time import time_collective
    rows = time_collective("ring", "all_reduce", world=4, sizes=[2**10, 2**14, 2**18])

Each size runs in one pool job: every rank makes its own inputs with the op's ``make``, calls the variant once to
warm up, then ``repeats`` times between barriers, timing each call with ``time.perf_counter``. A call ends when
the slowest rank is done, so the time of a size is the maximum over ranks of each rank's median. algbw = S / t and
busbw = algbw * the op's factor (2(n-1)/n for all-reduce, (n-1)/n for the others) follow nccl-tests, with S the
op's ``bytes`` (one rank's vector for all_reduce and reduce_scatter, the gathered output for all_gather, what
one rank sends for all_to_all).

In cpu mode the ranks are processes on this machine talking through gloo over loopback TCP: the numbers say how
the algorithms compare here (latency-bound small messages, copy-bound large ones), not what any GPU link does;
every row says so in its ``where`` field. ``benchmarks/comm_busbw.py`` measures NCCL on GPUs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from workbench.comm import WHERE_CPU
from workbench.comm_model import algbw, bus_factor
from workbench.comm_pool import pool
from workbench.registry import Variant, as_dtype, dtype_name, get_op, variant


def _rank_timing(rank: int, world: int, dev: torch.device, op: str, name: str, shapes: list[dict], dtype: str,
                 repeats: int) -> list[float]:
    """Time ``op/name`` at each shape on this rank; return this rank's median seconds per shape (a pool rank)."""
    import torch.distributed as dist

    v = variant(op, name)
    spec = get_op(op)
    out = []
    for shape in shapes:
        sizes, kw = spec.split(shape)
        inputs = spec.make(sizes | kw, as_dtype(dtype), 0, dev)[rank]
        v.fn(*inputs, None, **kw)  # warm-up: buffers, connections
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            v.fn(*inputs, None, **kw)
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out


def time_collective(fn: Variant | str, op: str | None = None, world: int = 4, sizes: Sequence[int] = (2**10, 2**16),
                    *, shapes: Sequence[dict] | None = None, dtype: str | torch.dtype = "float32", repeats: int = 5,
                    timeout_s: float = 120.0) -> list[dict]:
    """Time a registered collective at each size on ``world`` ranks; return one row per size.

    ``fn`` is a Variant or a variant's name (with ``op``). ``sizes`` are element counts N (the vector ops); pass
    ``shapes`` (dicts of the op's sizes without ``world``) for all_to_all. Rows: op, name, world, shape, dtype,
    bytes (S), t_s (max over ranks of the median), algbw_GBps, busbw_GBps, where.
    """
    v = fn if isinstance(fn, Variant) else variant(op or "", fn)
    spec = get_op(v.op)
    if not spec.distributed:
        raise ValueError(f"time_collective: {v.op} is not a distributed op")
    if repeats < 1:
        raise ValueError(f"time_collective: repeats must be >= 1, got {repeats}")
    todo = [dict(s) for s in shapes] if shapes is not None else [{"N": int(n)} for n in sizes]
    full = [{"world": world, **s} for s in todo]
    dt = dtype_name(dtype)
    per_rank = pool().run(_rank_timing, world, (v.op, v.name, full, dt, repeats), trace=False, timeout_s=timeout_s,
                          label=f"time {v.op}/{v.name}")[0]
    rows = []
    for i, shape in enumerate(full):
        t = max(r[i] for r in per_rank)
        nbytes = spec.bytes(dtype=dt, **shape)
        a = algbw(nbytes, t)
        rows.append({"op": v.op, "name": v.name, "world": world, "shape": shape, "dtype": dt, "bytes": int(nbytes),
                     "t_s": t, "algbw_GBps": a, "busbw_GBps": a * bus_factor(v.op, world), "where": WHERE_CPU})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Return the rows as a fixed-width text table (bytes, time, algbw, busbw), headed by where they were measured."""
    lines = [f"{rows[0]['where']}" if rows else "", f"{'op/name':32} {'world':>5} {'bytes':>12} {'time':>11} "
             f"{'algbw':>11} {'busbw':>11}"]
    for r in rows:
        lines.append(f"{r['op'] + '/' + r['name']:32} {r['world']:>5} {r['bytes']:>12,} {r['t_s'] * 1e6:>8.1f} us "
                     f"{r['algbw_GBps']:>7.3f} GB/s {r['busbw_GBps']:>6.3f} GB/s")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the bus factor
#: The ring (or pairwise) variant whose traffic defines each collective's bus factor, and its S.
TRAFFIC_VARIANTS = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring", "all_to_all": "pairwise"}
TRAFFIC_N = 60  # elements per rank's vector: divisible by every world 1..5, so every chunk is S / n exactly
TRAFFIC_D = 4  # all_to_all: columns of a row; each rank sends 3 rows to each rank


def _rank_traffic(rank: int, world: int, dev: torch.device) -> dict[str, tuple[int, int]]:
    """Run each collective's ring variant once; return {op: (bytes this rank sent, S)} (a pool rank, traced)."""
    from workbench.comm_trace import current

    tracer = current()
    out = {}
    for op, name in TRAFFIC_VARIANTS.items():
        g = torch.Generator().manual_seed(rank)
        if op == "all_to_all":
            x = torch.randn(3 * world, TRAFFIC_D, generator=g)
            args: tuple = (x, torch.full((world,), 3, dtype=torch.int64))
            s = x.numel() * 4  # what one rank sends, its own block included
        elif op == "all_gather":
            x = torch.randn(TRAFFIC_N // world, generator=g)
            args, s = (x,), TRAFFIC_N * 4  # S of an all-gather: the gathered output
        else:
            args, s = (torch.randn(TRAFFIC_N, generator=g),), TRAFFIC_N * 4
        before = len(tracer.events)
        variant(op, name).fn(*args, None)
        sent = sum(e.bytes for e in tracer.events[before:] if e.op in ("isend", "send") and e.peer != rank)
        if op == "all_to_all":  # the counts go first (one int64 to each peer): not data, S does not count them
            sent -= 8 * (world - 1)
        out[op] = (sent, s)
    return out


_TRAFFIC: dict[int, dict[str, float]] = {}


def measured_bus_factors(world: int) -> dict[str, float]:
    """Return {op: bytes each rank's link carries / S}, measured by tracing one run of each ring on ``world`` ranks."""
    if world not in _TRAFFIC:
        per_rank = pool().run(_rank_traffic, world, (), label=f"ring traffic, world {world}")[0]
        _TRAFFIC[world] = {op: max(r[op][0] for r in per_rank) / per_rank[0][op][1] for op in TRAFFIC_VARIANTS}
    return _TRAFFIC[world]


def check_bus_factor(fn: Any, worlds: Sequence[int] = (1, 2, 3, 4), **_: Any) -> Any:
    """Check a learner's ``bus_factor(op, n)`` against the traffic the rings really send, per op and world size.

    Each ring variant runs once per world on the pool with the tracer on; the bytes a rank sends to other ranks
    divided by S is the factor nccl-tests multiplies algbw by. Returns a CheckReport with one run per (op, world).
    """
    from workbench.checker import CaseResult, CheckReport

    report = CheckReport(op="all_reduce", name=getattr(fn, "__name__", "fn"), cases=[])  # the exercise's op
    for world in worlds:
        want = measured_bus_factors(world)
        for op, expected in want.items():
            res = CaseResult(shape={"op": op, "world": world}, dtype="float64", seed=0, case="random", ok=False,
                             n_elements=1)
            try:
                got = float(fn(op, world))
            except Exception as e:  # noqa: BLE001  (the learner's function raising is a failed run)
                res.diagnosis, res.detail = "error", f"{type(e).__name__}: {e}"
                report.cases.append(res)
                continue
            res.max_abs_err = abs(got - expected)
            res.ok = res.max_abs_err <= 1e-9
            if not res.ok:
                res.n_mismatch, res.diagnosis = 1, "bus_factor"
                res.first_indices = [(0,)]
                res.worst = {"index": (0,), "got": f"{got:.6g}", "expected": f"{expected:.6g}",
                             "abs_err": res.max_abs_err, "tol": 1e-9}
            report.cases.append(res)
    return report
