"""Expert parallelism (EP) for the moe op: every rank owns E/world experts and its own tokens; two all-to-alls.

The layer is the same as :mod:`kernels.moe.reference` (top_k routing, SwiGLU experts, weighted sum). What changes
is *where* things live. With ``world`` ranks, rank r holds:

- its own tokens, a shard of T: ``x_local[T_r, d]`` and ``router_logits_local[T_r, E]``;
- experts ``[r*E/world, (r+1)*E/world)``: ``w1_local[E/world, 2I, d]``, ``w2_local[E/world, d, I]``.

A token's experts usually live on other ranks, so the token travels to them and the results travel back:

1. **route** at home: weights and expert ids ``[T_r, top_k]``. The weights stay home, they are applied last.
2. **plan**: each (token, slot) pair goes to rank ``expert_id // (E/world)``. Sort the T_r*top_k pairs by
   destination rank so that every rank's rows are one contiguous block of the send buffer.
3. **exchange counts** (all-to-all #0, ``world`` int64 each): routing depends on the data, so rank r cannot know
   how many rows the others will send it. ``all_to_all_single`` needs the receive split sizes up front to size
   the receive buffer and to know where each sender's block lands, so the counts go first. This is tiny
   (8 bytes per peer) but it costs a full collective latency and, on a GPU, a device->host sync (``.tolist()``)
   before the next collective can be launched.
4. **dispatch** (all-to-all #1): send the token rows ``[rows, d]`` and their expert ids (as the receiver's local
   id, int32). A token whose top_k experts sit on the same rank is sent top_k times (simple, not optimal).
5. **expert compute**: group the received rows by local expert (sort by id) and run each expert's SwiGLU on its
   contiguous block, the same math as ``torch_loop``. Experts that got no rows are skipped.
6. **combine** (all-to-all #2): send every result row back to the rank it came from, the reverse of #1 (the
   send and receive split sizes swap). Rows come back in the order they were sent, so the plan's permutation
   undoes itself.
7. **weighted sum** at home: un-permute to ``[T_r, top_k, d]``, multiply by the router weights, sum over top_k.

Napkin numbers (bytes that leave a rank): each (token, slot) pair is one row of d elements, each way.

- dispatch and combine: ``top_k * d * elem_size`` bytes per token *each way* (plus 4 B per pair for the id).
  Mixtral-8x7B (d = 4096, top_k = 2) in bf16: 2 * 4096 * 2 B = 16 KiB per token each way, 32 KiB round trip.
- prefill, T_r = 4096 tokens per rank: 4096 * 16 KiB = 64 MiB each way. At ~300 GB/s of NVLink all-to-all that
  is ~0.22 ms; at 50 GB/s (one 400 Gb/s InfiniBand NIC) ~1.3 ms. The experts' math on that rank is
  6 * 4096 * 2 * 4096 * 14336 = 2.9 TFLOP, ~4 ms at 700 TFLOP/s: prefill hides the traffic if it overlaps.
- decode, T_r = 64 tokens: 1 MiB each way, ~3 us of NVLink bandwidth, but each all-to-all costs tens of us of
  latency and the counts exchange adds a host sync: decode EP is latency-bound, not bandwidth-bound.
- with uniform routing a fraction 1/world of the rows stays home (here too: rank r also "sends" to itself).

What a production library (DeepSeek's DeepEP) does better, mentioned only: it sends a token once per
destination rank/node instead of once per expert and expands it on arrival; uses NVLink inside a node and RDMA
between nodes (forwarding through one GPU per node); dispatches in FP8; overlaps communication with the expert
GEMMs; and has a low-latency mode for decode that writes into preallocated worst-case buffers with RDMA, with
no counts exchange and no host sync, so the whole step can be captured in a CUDA graph.

The check: :func:`run_ep_check` spawns ``world`` processes (gloo on CPU, NCCL when ``world`` GPUs are
present), runs :func:`ep_moe` on each, gathers the token shards back and compares them with the float64
reference and the single-process ``torch_loop``. It is safe to call from a notebook: the worker is a module-level
function (spawn pickles it by name), a worker's traceback is re-raised in the caller, and a timeout kills hung
workers.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import pickle
import queue as queue_mod
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

import workbench
from kernels.moe.reference import route, swiglu, tolerance, torch_loop

# ------------------------------------------------------------------------------------------------------ dispatch plan


@dataclass
class DispatchPlan:
    """Where each of a rank's T_r*top_k (token, slot) pairs goes, sorted by destination rank.

    - ``order[n]``: flat pair index (token*top_k + slot) of the n-th send row; the send buffer is
      ``x[order // top_k]``. Stable sort: within one destination the pairs keep token order.
    - ``send_counts[world]``: rows sent to each rank (int64, on the ids' device): the split sizes.
    - ``local_ids[n]``: the n-th send row's expert id on its destination rank, in ``[0, E/world)`` (int32).
    """

    order: torch.Tensor
    send_counts: torch.Tensor
    local_ids: torch.Tensor


def plan_dispatch(ids: torch.Tensor, experts_per_rank: int, world: int) -> DispatchPlan:
    """Sort the (token, slot) pairs of ``ids[T_r, top_k]`` by the rank owning their expert and count them per rank."""
    flat = ids.reshape(-1)
    dest = torch.div(flat, experts_per_rank, rounding_mode="floor")  # rank r owns [r*Er, (r+1)*Er)
    order = torch.argsort(dest, stable=True)
    send_counts = torch.bincount(dest, minlength=world).to(torch.int64)
    local_ids = (flat[order] - dest[order] * experts_per_rank).to(torch.int32)
    return DispatchPlan(order=order, send_counts=send_counts, local_ids=local_ids)


def _expert_mlp(rows: torch.Tensor, local_ids: torch.Tensor, w1_local: torch.Tensor,
                w2_local: torch.Tensor) -> torch.Tensor:
    """Run each received row through its local expert (SwiGLU, torch_loop's math); return [rows, d] in x's dtype."""
    n_local = w1_local.shape[0]
    out = torch.empty_like(rows)
    if rows.shape[0] == 0:
        return out
    # Group rows by expert: one sort, then each expert's rows are a contiguous block (the grouped-GEMM layout that
    # moe_align builds on the GPU). Per-expert counts come to the host once to slice the blocks.
    perm = torch.argsort(local_ids, stable=True)
    counts = torch.bincount(local_ids.to(torch.int64), minlength=n_local).tolist()
    grouped = rows[perm]
    y = torch.empty_like(grouped)
    start = 0
    for e, n in enumerate(counts):
        if n == 0:  # an expert no token picked: no GEMM at all
            continue
        xe = grouped[start:start + n]
        h = xe @ w1_local[e].T  # [n, 2I]: gate rows 0..I-1, up rows I..2I-1
        y[start:start + n] = swiglu(h, rows.dtype) @ w2_local[e].T  # [n, d]; activation in fp32, like torch_loop
        start += n
    out[perm] = y  # back to arrival order: combine must return rows in the order they came
    return out


# ------------------------------------------------------------------------------------------------------ ep_moe


def ep_moe(x_local: torch.Tensor, router_logits_local: torch.Tensor, w1_local: torch.Tensor,
           w2_local: torch.Tensor, top_k: int, renormalize: bool = True, group: Any = None,
           stats: dict | None = None) -> torch.Tensor:
    """Run the moe layer on this rank's tokens with the experts spread over the ranks of ``group``.

    Collective: every rank of ``group`` must call it (with its own tokens, possibly zero of them). Tensors live
    on the rank's device (CPU for gloo, its cuda device for NCCL). ``w1_local[E/world, 2I, d]`` and
    ``w2_local[E/world, d, I]`` are this rank's experts; ``router_logits_local`` spans all E experts.
    ``stats``, when a dict, receives this rank's bookkeeping: rows sent to / received from each rank and the
    bytes each all-to-all put on the wire from this rank. Returns ``[T_r, d]`` in x's dtype.
    """
    world = dist.get_world_size(group)
    if x_local.dim() != 2 or router_logits_local.dim() != 2 or w1_local.dim() != 3 or w2_local.dim() != 3:
        raise ValueError("ep_moe: expected x[T_r,d], router_logits[T_r,E], w1_local[E_r,2I,d], w2_local[E_r,d,I]")
    t_local, d = x_local.shape
    n_local, two_i, _ = w1_local.shape
    e_total = router_logits_local.shape[1]
    if router_logits_local.shape[0] != t_local:
        raise ValueError(f"ep_moe: router_logits has {router_logits_local.shape[0]} rows, x has {t_local}")
    if n_local * world != e_total:
        raise ValueError(f"ep_moe: {world} ranks x {n_local} local experts != E = {e_total} router columns")
    if w1_local.shape[2] != d or two_i % 2 or tuple(w2_local.shape) != (n_local, d, two_i // 2):
        raise ValueError(f"ep_moe: w1_local {tuple(w1_local.shape)} / w2_local {tuple(w2_local.shape)} do not fit "
                         f"d = {d}")
    if not 1 <= top_k <= e_total:
        raise ValueError(f"ep_moe: top_k must be in [1, E={e_total}], got {top_k}")

    dev = x_local.device
    weights, ids = route(router_logits_local, top_k, renormalize)  # [T_r, top_k] each; the weights stay home
    plan = plan_dispatch(ids, n_local, world)

    # All-to-all #0: counts. send_counts[j] rows go to rank j; afterwards recv_counts[j] rows come from rank j.
    recv_counts = torch.empty_like(plan.send_counts)
    dist.all_to_all_single(recv_counts, plan.send_counts, group=group)
    send_split = plan.send_counts.tolist()  # split sizes must be Python ints: on a GPU this is a host sync
    recv_split = recv_counts.tolist()
    n_recv = sum(recv_split)

    # All-to-all #1: dispatch rows and their local expert ids. x[order // top_k] copies each token once per slot.
    send_x = x_local[plan.order // top_k].contiguous()  # [T_r*top_k, d]
    recv_x = torch.empty((n_recv, d), dtype=x_local.dtype, device=dev)
    recv_ids = torch.empty((n_recv,), dtype=torch.int32, device=dev)
    dist.all_to_all_single(recv_x, send_x, recv_split, send_split, group=group)
    dist.all_to_all_single(recv_ids, plan.local_ids, recv_split, send_split, group=group)

    y_recv = _expert_mlp(recv_x, recv_ids, w1_local, w2_local)  # [n_recv, d], same order as recv_x

    # All-to-all #2: combine. The reverse trip: what came from rank j goes back to rank j, so the splits swap.
    y_sent = torch.empty_like(send_x)
    dist.all_to_all_single(y_sent, y_recv, send_split, recv_split, group=group)

    # Undo the dispatch sort (row n answers pair order[n]), then weight and sum the top_k slots of each token.
    y_pairs = torch.empty_like(y_sent)
    y_pairs[plan.order] = y_sent
    acc = torch.promote_types(x_local.dtype, torch.float32)  # sum in fp32 (or fp64 for fp64 inputs)
    out = (y_pairs.view(t_local, top_k, d).to(acc) * weights.to(acc).unsqueeze(-1)).sum(dim=1)

    if stats is not None:
        es = x_local.element_size()
        stats.update(
            sent_rows=send_split, recv_rows=recv_split,
            # Bytes this rank hands to each all-to-all (its own block included, it never leaves the rank).
            bytes_counts=world * 8,
            bytes_dispatch=sum(send_split) * (d * es + 4),  # token row + int32 expert id
            bytes_combine=n_recv * d * es,
        )
    return out.to(x_local.dtype)


# ------------------------------------------------------------------------------------------------------ the check


def _shard_bounds(n: int, world: int) -> list[tuple[int, int]]:
    """Split n items over world ranks as evenly as possible, the first ones one larger (like tensor_split)."""
    base, extra = divmod(n, world)
    bounds, start = [], 0
    for r in range(world):
        size = base + (1 if r < extra else 0)
        bounds.append((start, start + size))
        start += size
    return bounds


def _to_bytes(obj: Any) -> bytes:
    """Pickle a report (dicts, lists, numbers, tensors) with every tensor as dtype, shape and raw bytes.

    Not a tensor through the queue: torch's queue pickling shares memory that dies with the sending process, and
    the worker exits right after sending. Not ``torch.save`` either: a rank that owns no token has empty tensors,
    and in CI a saved empty storage came back with another storage's bytes ("record size 128 bytes does not match
    expected size 0"). Raw bytes of a contiguous copy have no storages to mix up.
    """
    return pickle.dumps(_walk(obj, _pack), protocol=pickle.HIGHEST_PROTOCOL)


def _walk(obj: Any, leaf: Any) -> Any:
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


def _from_bytes(payload: bytes) -> Any:
    """Rebuild what :func:`_to_bytes` packed (the payload comes from our own spawned rank)."""
    return _walk(pickle.loads(payload), _unpack)  # noqa: S301  (our own child process's report)


def _worker(rank: int, world: int, port: int, backend: str, jobs: list[dict], timeout_s: float,
            results: Any) -> None:
    """Join the process group, run ep_moe on this rank's shard of every job and report to the parent's queue."""
    try:
        timeout = datetime.timedelta(seconds=timeout_s)
        if backend == "nccl":
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
        else:
            dev = torch.device("cpu")
        # Rendezvous: the parent holds the TCP store at 127.0.0.1:port (what MASTER_ADDR:MASTER_PORT would name
        # with torchrun's env:// init); each rank joins it as a client, then the ranks find each other through it.
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout,
                                device_id=dev if dev.type == "cuda" else None)  # NCCL: bind the rank to its GPU
        reports = []
        for job in jobs:
            s = job["shape"]
            # Each rank makes the full inputs on the CPU from the seed and keeps its shard, like loading its part of
            # a checkpoint: cheaper than pickling every expert's weights into every process.
            x, logits, w1, w2, top_k = workbench.make_inputs("moe", dtype=job["dtype"], seed=job["seed"],
                                                             device="cpu", case=job["case"], **s)
            t0, t1 = _shard_bounds(s["T"], world)[rank]
            n_local = s["E"] // world
            e0 = rank * n_local
            args = (x[t0:t1].to(dev), logits[t0:t1].to(dev), w1[e0:e0 + n_local].to(dev),
                    w2[e0:e0 + n_local].to(dev))
            del x, logits, w1, w2
            stats: dict = {}
            out = ep_moe(*args, top_k, renormalize=job["renormalize"], stats=stats)  # also the warm-up
            times = []
            for _ in range(job["repeats"]):
                dist.barrier()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                start = time.perf_counter()
                ep_moe(*args, top_k, renormalize=job["renormalize"])
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                times.append(time.perf_counter() - start)
            reports.append({"out": out.cpu(), "stats": stats, "ep_s": min(times) if times else math.nan})
        dist.barrier()
        dist.destroy_process_group()
        results.put(("ok", rank, _to_bytes(reports)))
    except BaseException:  # noqa: BLE001  (report anything, KeyboardInterrupt included, as text to the parent)
        results.put(("error", rank, traceback.format_exc()))
        raise SystemExit(1) from None


def _pick_backend(backend: str | None, world: int) -> str:
    """Return ``backend``, or nccl when world GPUs and NCCL are there, else gloo."""
    if backend is None:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return "nccl" if gpus >= world and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not dist.is_nccl_available() or gpus < world:
            raise RuntimeError(f"backend 'nccl' needs {world} GPUs (one per rank) and an NCCL build of torch; "
                               f"this machine has {gpus} GPU(s), NCCL available: {dist.is_nccl_available()}")
    elif backend != "gloo":
        raise ValueError(f"backend must be 'gloo', 'nccl' or None (pick), got {backend!r}")
    return backend


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
    f.flush()
    f.seek(0)
    text = f.read().decode(errors="replace").strip()
    return text[-n:] if text else "(it wrote nothing to stderr)"


def _collect(procs: list, results: Any, backend: str, timeout_s: float, start: float, errlog: Any) -> dict[int, Any]:
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
                    raise RuntimeError(f"ep rank {dead[0]} exited with code {procs[dead[0]].exitcode} without "
                                       f"reporting; the ranks' stderr:\n{_tail(errlog)}") from None
            if time.perf_counter() > deadline:
                missing = [r for r in range(world) if r not in reports]
                raise TimeoutError(f"ep check: ranks {missing} of {world} did not finish within "
                                   f"{timeout_s:g} s (backend {backend}; a hung collective?): "
                                   "all ranks killed") from None
            continue
        if kind == "error":
            raise RuntimeError(f"ep rank {rank} of {world} failed (backend {backend}):\n{payload}")
        reports[rank] = _from_bytes(payload)  # tensors, lists, numbers
    return reports


def run_ep_checks(configs: list[dict], world: int = 2, backend: str | None = None,
                  timeout_s: float = 120.0, repeats: int = 3) -> list[dict]:
    """Check ep_moe on several configs in one group of ``world`` spawned processes; return one dict per config.

    Each config takes the keys of :func:`run_ep_check` (T, d, I, E, top_k, dtype, seed, case, renormalize);
    missing ones take its defaults. Starting processes and importing torch costs seconds, so batching configs
    into one group is much cheaper than one group each. Raises RuntimeError with the worker's traceback if a
    rank fails and TimeoutError (after killing every rank) if the group has not finished in ``timeout_s``.
    """
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    defaults = {"T": 64, "d": 64, "I": 128, "E": 8, "top_k": 2, "dtype": torch.float32, "seed": 0,
                "case": "random", "renormalize": True}
    jobs, inputs = [], []
    for cfg in configs:
        unknown = set(cfg) - set(defaults)
        if unknown:
            raise ValueError(f"run_ep_checks: unknown config keys {sorted(unknown)}; known: {sorted(defaults)}")
        c = {**defaults, **cfg}
        if c["E"] % world:
            raise ValueError(f"E = {c['E']} experts do not split evenly over world = {world} ranks")
        shape = {k: c[k] for k in ("T", "d", "I", "E", "top_k")}
        # Made here first: a bad shape, dtype or case fails now, in the caller, not in every rank; the reference
        # below runs on these same tensors. The ranks remake them from the seed (see _worker).
        inp = workbench.make_inputs("moe", dtype=c["dtype"], seed=c["seed"], device="cpu", case=c["case"], **shape)
        workbench.get_op("moe").validate(*inp, renormalize=c["renormalize"])  # top_k in [1, E], shapes, dtypes
        inputs.append(inp)
        jobs.append({"shape": shape, "dtype": c["dtype"], "seed": c["seed"], "case": c["case"],
                     "renormalize": c["renormalize"], "repeats": repeats})
    backend = _pick_backend(backend, world)

    # Rendezvous: the parent binds a TCP store on a free port (port 0: the OS picks one) and keeps it open, so no
    # other program can grab the port between choosing it and the ranks connecting.
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout_s))
    ctx = torch.multiprocessing.get_context("spawn")  # fork is unsafe with threads/CUDA; spawn works in Jupyter
    results = ctx.Queue()
    start = time.perf_counter()
    procs = [ctx.Process(target=_worker, args=(r, world, store.port, backend, jobs, timeout_s, results),
                         daemon=True, name=f"ep-rank{r}") for r in range(world)]
    errlog = tempfile.TemporaryFile()  # the ranks' stderr: shown if one dies before it can report
    try:
        with _stderr_to(errlog):
            for p in procs:
                p.start()
        reports = _collect(procs, results, backend, timeout_s, start, errlog)
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
    wall_s = time.perf_counter() - start

    ref_fn = workbench.reference("moe")
    out = []
    for j, job in enumerate(jobs):
        s = job["shape"]
        kw = {"renormalize": job["renormalize"]}
        ref = ref_fn(*inputs[j], **kw)
        base = torch_loop(*inputs[j], **kw)
        got = torch.cat([reports[r][j]["out"] for r in range(world)])
        stats = [reports[r][j]["stats"] for r in range(world)]
        atol, rtol = tolerance(job["dtype"], s)
        base_err = float((base.double() - ref).abs().max()) if ref.numel() else 0.0
        if job["dtype"] in (torch.float16, torch.bfloat16):  # the checker's rule: up to 2x torch's own error
            atol = max(atol, 2 * base_err)
        err = (got.double() - ref).abs()
        ok = tuple(got.shape) == tuple(ref.shape) and bool(torch.isfinite(got).all()) and bool(
            (err <= atol + rtol * ref.abs()).all())
        es = torch.empty((), dtype=job["dtype"]).element_size()
        cross = [sum(n for dst, n in enumerate(st["sent_rows"]) if dst != r) for r, st in enumerate(stats)]
        out.append({
            **s, "dtype": str(job["dtype"]).removeprefix("torch."), "case": job["case"], "world": world,
            "backend": backend, "ok": ok,
            "max_abs_err": float(err.max()) if err.numel() else 0.0,
            "max_abs_err_vs_torch_loop": float((got.double() - base.double()).abs().max()) if err.numel() else 0.0,
            "tol": {"atol": atol, "rtol": rtol},
            "tokens_per_rank": [b - a for a, b in _shard_bounds(s["T"], world)],
            "experts_per_rank": s["E"] // world,
            "sent_rows": [st["sent_rows"] for st in stats],  # [src][dst]: (token, slot) rows
            "recv_rows": [st["recv_rows"] for st in stats],  # [dst][src]
            "cross_rank_rows": cross,  # rows each rank sent to *other* ranks (the rest never leave the rank)
            "bytes": {"counts": sum(st["bytes_counts"] for st in stats),
                      "dispatch": sum(st["bytes_dispatch"] for st in stats),
                      "combine": sum(st["bytes_combine"] for st in stats)},
            "bytes_cross_rank": {"dispatch": sum(cross) * (s["d"] * es + 4), "combine": sum(cross) * s["d"] * es},
            "bytes_per_token_each_way": s["top_k"] * s["d"] * es,
            "ep_ms": 1e3 * max(reports[r][j]["ep_s"] for r in range(world)),
            "wall_s": wall_s,
        })
    return out


def run_ep_check(world: int = 2, T: int = 64, d: int = 64, I: int = 128, E: int = 8, top_k: int = 2,
                 dtype: torch.dtype = torch.float32, seed: int = 0, case: str = "random", renormalize: bool = True,
                 backend: str | None = None, timeout_s: float = 120.0) -> dict:
    """Spawn ``world`` ranks, run ep_moe on one moe problem and compare with the float64 reference.

    Inputs come from ``workbench.make_inputs("moe", ...)`` with ``seed``; tokens are split evenly over the ranks
    (the first ranks take one more when T % world != 0, a rank may get none) and experts in contiguous blocks of
    E/world. Backend: nccl when ``world`` GPUs are present, else gloo on the CPU. Returns a dict with ``ok``,
    ``max_abs_err`` (vs the reference), ``max_abs_err_vs_torch_loop``, ``tol``, the rows each rank sent to and
    received from each rank, the bytes each all-to-all moved (``bytes``: all rows; ``bytes_cross_rank``: rows
    that left their rank), ``ep_ms`` (slowest rank, best of 3 calls) and ``wall_s`` (spawn included).
    Call it from a notebook cell as is; a script must call it under ``if __name__ == "__main__":`` because
    spawned ranks re-import the main script.
    """
    cfg = {"T": T, "d": d, "I": I, "E": E, "top_k": top_k, "dtype": dtype, "seed": seed, "case": case,
           "renormalize": renormalize}
    return run_ep_checks([cfg], world=world, backend=backend, timeout_s=timeout_s)[0]
