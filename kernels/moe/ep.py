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

The check: :func:`run_ep_check` spawns ``world`` ranks with :func:`workbench.distributed.run_ranks` (gloo on CPU,
NCCL when ``world`` GPUs are present), runs :func:`ep_moe` on each, gathers the token shards back and judges them
as ``wb.check`` judges any moe output (:func:`workbench.checker.compare_output`): the op's tolerance, NaN and Inf
matched, in fp16/bf16 up to 2x the error of the single-process ``torch_loop``, and a diagnosis when it is wrong.
It is safe to call from a notebook: the harness re-raises a rank's traceback in the caller and kills hung ranks
after a timeout.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

import workbench
from kernels.moe.reference import route, swiglu, tolerance, torch_loop
from workbench import distributed
from workbench.checker import compare_output

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


def _rank_jobs(rank: int, world: int, dev: torch.device, jobs: list[dict]) -> list[dict]:
    """Run ep_moe on this rank's shard of every job (a rank of :func:`workbench.distributed.run_ranks`)."""
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
        args = (x[t0:t1].to(dev), logits[t0:t1].to(dev), w1[e0:e0 + n_local].to(dev), w2[e0:e0 + n_local].to(dev))
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
        # below runs on these same tensors. The ranks remake them from the seed (see _rank_jobs).
        inp = workbench.make_inputs("moe", dtype=c["dtype"], seed=c["seed"], device="cpu", case=c["case"], **shape)
        workbench.get_op("moe").validate(*inp, renormalize=c["renormalize"])  # top_k in [1, E], shapes, dtypes
        inputs.append(inp)
        jobs.append({"shape": shape, "dtype": c["dtype"], "seed": c["seed"], "case": c["case"],
                     "renormalize": c["renormalize"], "repeats": repeats})
    backend = distributed.pick_backend(backend, world)
    start = time.perf_counter()
    reports = distributed.run_ranks(_rank_jobs, world, jobs, backend=backend, timeout_s=timeout_s, label="ep")
    wall_s = time.perf_counter() - start

    return [_judge(job, inp, [rep[j] for rep in reports], backend, wall_s)
            for j, (job, inp) in enumerate(zip(jobs, inputs, strict=True))]


def _judge(job: dict, inputs: tuple, ranks: list[dict], backend: str, wall_s: float) -> dict:
    """Judge one job's gathered output with the checker's comparison; return its result dict with the bookkeeping."""
    s, world = job["shape"], len(ranks)
    kw = {"renormalize": job["renormalize"]}
    ref = workbench.reference("moe")(*inputs, **kw)
    base = torch_loop(*inputs, **kw)  # torch's own error at this dtype sets the fp16/bf16 tolerance
    got = torch.cat([r["out"] for r in ranks])
    res = compare_output("moe", got, ref, job["dtype"], {**s, **kw}, torch_out=base, inputs=inputs,
                         case=job["case"], seed=job["seed"])
    atol, rtol = tolerance(job["dtype"], s)
    stats = [r["stats"] for r in ranks]
    es = torch.empty((), dtype=job["dtype"]).element_size()
    cross = [sum(n for dst, n in enumerate(st["sent_rows"]) if dst != r) for r, st in enumerate(stats)]
    same = got.shape == base.shape and got.numel()
    return {
        **s, "dtype": str(job["dtype"]).removeprefix("torch."), "case": job["case"], "world": world,
        "backend": backend, "ok": res.ok, "diagnosis": res.diagnosis, "result": res.line(),
        "max_abs_err": res.max_abs_err,
        "max_abs_err_vs_torch_loop": float((got.double() - base.double()).abs().max()) if same else 0.0,
        "tol": {"atol": max(atol, 2 * (res.torch_err or 0.0)), "rtol": rtol},
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
        "ep_ms": 1e3 * max(r["ep_s"] for r in ranks),
        "wall_s": wall_s,
    }


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
