"""Price a collective: nccl-tests' algorithm and bus bandwidth, and an alpha-beta model of each all-reduce.

**Measured bandwidths** (nccl-tests, ``doc/PERFORMANCE.md``): a collective of ``S`` bytes that took ``t`` seconds has
``algbw = S / t`` and ``busbw = algbw * factor``, the factor chosen so that busbw compares to one GPU's link speed
whatever the number of ranks ``n``: ``2(n-1)/n`` for all_reduce, ``(n-1)/n`` for reduce_scatter, all_gather and
all_to_all, 1 for broadcast and reduce. ``S`` is each rank's buffer for all_reduce, and the whole (gathered or
scattered) array of ``n`` shards for reduce_scatter / all_gather / all_to_all, as nccl-tests counts it.

**The model** (labelled "model" wherever it is shown): an all-reduce algorithm is a list of steps; in each step every
rank sends one message and receives one (a full-duplex link: both at ``B`` bytes/s each way), then may reduce what it
received. A step of ``b`` bytes costs ``alpha + b / B`` (``alpha``: the fixed cost of a step, ``1 / B``: the beta of
alpha-beta), plus ``b / R`` where the rank adds what it received at ``R`` bytes/s (``reduce_gbs``; None leaves the
reduction out, as NCCL fuses it into the copy). The algorithms, for ``n`` ranks and ``S`` bytes per rank:

* ``naive``: every rank sends its buffer to rank 0, which adds them and sends the sum back: ``2(n-1)`` messages of
  ``S`` through rank 0's one link, one after another.
* ``ring``: reduce-scatter then all-gather around the ring, ``2(n-1)`` steps of ``S/n``: every link busy every step,
  ``t -> 2(n-1)/n * S / B`` for large ``S``, hence all_reduce's busbw factor.
* ``halving_doubling`` (recursive halving-doubling, Rabenseifner): reduce-scatter by exchanging halves with
  partners at distance ``n/2, n/4, ...`` (``S/2, S/4, ..., S/n``), then all-gather doubling back: the ring's bytes
  in ``2 log2 n`` steps.
  A world that is not a power of two first folds its extra ranks into partners (one step of ``S``) and returns the
  result to them at the end (one more).
* ``ring_pipelined``: the ring with each step's ``S/n`` cut in ``chunks`` pieces, so that a piece is reduced while the
  next is in flight: ``chunks`` times the alphas, the reduction hidden except for one piece per step.
* ``tree`` (NCCL's double binary tree, pipelined; the pipeline's fill is ignored): ``2 ceil(log2 n)`` alphas and
  ``2 S / B``: fewer alphas than the ring at large ``n``, ``n/(n-1)`` times its bytes.

Link figures (bandwidth per direction, latencies stated as assumptions) come from :data:`workbench.hardware.LINKS`;
GEMM peaks from :mod:`workbench.hardware`. No GPU figure here is measured: they are the model's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench import hardware

__all__ = [
    "ALGORITHMS",
    "BUS_FACTORS",
    "MODEL_LABEL",
    "Model",
    "Step",
    "algbw",
    "all_reduce_model",
    "bus_factor",
    "busbw",
    "fit_alpha_beta",
    "grad_sync_model",
    "model_events",
    "ring_attention_events",
    "schedule",
    "tp_allreduce_vs_gemm",
    "tp_crossover_hidden",
]

MODEL_LABEL = "model"

#: nccl-tests' correction factors from algbw to busbw, by collective, as functions of the world size n.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}

ALGORITHMS = ("naive", "ring", "halving_doubling", "ring_pipelined", "tree")


def _world(world: Any, who: str) -> int:
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"{who}: world must be an int >= 1 (the number of ranks), got {world!r}")
    return world


def _positive(x: Any, what: str, who: str, *, zero: bool = False) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {what} must be a number, got {x!r}") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise ValueError(f"{who}: {what} must be {'>= 0' if zero else '> 0'} and finite, got {x!r}")
    return v


def bus_factor(op: str, world: int) -> float:
    """Return nccl-tests' busbw / algbw factor of collective ``op`` at ``world`` ranks (2(n-1)/n for all_reduce)."""
    if op not in BUS_FACTORS:
        raise ValueError(f"bus_factor: unknown collective {op!r}; known: {', '.join(BUS_FACTORS)}")
    return BUS_FACTORS[op](_world(world, "bus_factor"))


def algbw(nbytes: float, seconds: float) -> float:
    """Return nccl-tests' algorithm bandwidth S / t in GB/s (1e9 B/s)."""
    return _positive(nbytes, "nbytes", "algbw", zero=True) / _positive(seconds, "seconds", "algbw") / 1e9


def busbw(op: str, nbytes: float, seconds: float, world: int) -> float:
    """Return nccl-tests' bus bandwidth in GB/s: algbw times :func:`bus_factor` (comparable to one link's speed)."""
    return algbw(nbytes, seconds) * bus_factor(op, world)


# ----------------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Step:
    """One step of an all-reduce: who sends to whom and how many bytes each rank sends and then reduces.

    ``pairs`` lists (sender, receiver) pairs active in the step; ``nbytes`` is each message's size; ``reduce`` is
    whether the receiver adds what it got (reduce phase) or only keeps it (gather phase). The naive algorithm's
    steps have one pair each: rank 0's link carries its messages one after another.
    """

    pairs: tuple[tuple[int, int], ...]
    nbytes: float
    reduce: bool


def _rhd_steps(n: int, s: float) -> list[Step]:
    p = 1 << (n.bit_length() - 1)  # the largest power of two <= n; ranks p..n-1 fold into ranks 0..n-p-1
    extra = [(r, r - p) for r in range(p, n)]
    steps = [Step(tuple(extra), s, True)] if extra else []
    halving, size, dist = [], s, p // 2
    while dist >= 1:
        size /= 2
        halving.append(Step(tuple((r, r ^ dist) for r in range(p)), size, True))
        dist //= 2
    doubling = [Step(st.pairs, st.nbytes, False) for st in reversed(halving)]
    steps += halving + doubling
    if extra:
        steps.append(Step(tuple((d, r) for r, d in extra), s, False))
    return steps


def schedule(algorithm: str, world: int, nbytes: float, chunks: int = 4) -> list[Step]:
    """Return the steps of all-reducing ``nbytes`` per rank over ``world`` ranks with ``algorithm`` (see module doc).

    ``ring_pipelined`` returns the ring's steps with each message cut in ``chunks`` (``chunks`` steps per ring step).
    ``tree`` has no step list here (its pipeline is modelled in closed form): ValueError.
    """
    n = _world(world, "schedule")
    s = _positive(nbytes, "nbytes", "schedule", zero=True)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"schedule: unknown all-reduce algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if n == 1:
        return []
    ring = tuple((r, (r + 1) % n) for r in range(n))
    if algorithm == "naive":
        gather = [Step(((r, 0),), s, True) for r in range(1, n)]
        return gather + [Step(((0, r),), s, False) for r in range(1, n)]
    if algorithm == "ring":
        return [Step(ring, s / n, k < n - 1) for k in range(2 * (n - 1))]
    if algorithm == "ring_pipelined":
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise ValueError(f"schedule: chunks must be an int >= 1, got {chunks!r}")
        return [Step(ring, s / n / chunks, k < n - 1) for k in range(2 * (n - 1)) for _ in range(chunks)]
    if algorithm == "halving_doubling":
        return _rhd_steps(n, s)
    raise ValueError("schedule: the tree is modelled in closed form (2 ceil(log2 n) alphas + 2 S / B), it has no "
                     "step list; use all_reduce_model('tree', ...)")


@dataclass(frozen=True)
class Model:
    """An alpha-beta estimate of one all-reduce (labelled "model"): its steps, bytes and time split by term.

    ``steps`` counts the alphas paid; ``step_bytes`` sums the steps' message sizes (what the beta term moves, one
    step after another: ``2(n-1)/n * S`` for the ring, ``2(n-1) * S`` through the naive root); ``alpha_s``,
    ``beta_s`` and ``reduce_s`` are the latency, transfer and exposed-reduction parts of ``seconds``.
    """

    algorithm: str
    world: int
    nbytes: float
    link: str
    steps: int
    step_bytes: float
    alpha_s: float
    beta_s: float
    reduce_s: float
    label: str = MODEL_LABEL

    @property
    def seconds(self) -> float:
        """Return the modelled time in seconds."""
        return self.alpha_s + self.beta_s + self.reduce_s

    @property
    def busbw_gbs(self) -> float:
        """Return the busbw (GB/s) this time would show in nccl-tests' all_reduce (0 for one rank)."""
        if self.world == 1 or self.seconds == 0:
            return 0.0
        return busbw("all_reduce", self.nbytes, self.seconds, self.world)


def _link_params(link: hardware.Link | str, bandwidth_gbs: float | None, latency_us: float | None,
                 ) -> tuple[str, float, float]:
    spec = hardware.get_link(link) if bandwidth_gbs is None or latency_us is None else None
    bw = bandwidth_gbs if bandwidth_gbs is not None else spec.bandwidth_gbs
    lat = latency_us if latency_us is not None else spec.latency_us
    name = spec.key if spec is not None else (link if isinstance(link, str) else link.key)
    return (name, _positive(bw, "bandwidth_gbs", "all_reduce_model") * 1e9,
            _positive(lat, "latency_us", "all_reduce_model", zero=True) * 1e-6)


def all_reduce_model(algorithm: str, nbytes: float, world: int, link: hardware.Link | str = "nvlink4", *,
                     chunks: int = 4, reduce_gbs: float | None = None, bandwidth_gbs: float | None = None,
                     latency_us: float | None = None) -> Model:
    """Return the alpha-beta :class:`Model` of all-reducing ``nbytes`` per rank over ``world`` ranks.

    ``link`` names a :data:`workbench.hardware.LINKS` entry; ``bandwidth_gbs`` (per direction) and ``latency_us``
    override its figures (e.g. with a fit to measured gloo times, :func:`fit_alpha_beta`). ``reduce_gbs``: the rate
    at which a rank adds a received buffer into its own (None: free, fused into the copy).
    """
    name, bw, alpha = _link_params(link, bandwidth_gbs, latency_us)
    n = _world(world, "all_reduce_model")
    gamma = 0.0 if reduce_gbs is None else 1 / (_positive(reduce_gbs, "reduce_gbs", "all_reduce_model") * 1e9)
    s = _positive(nbytes, "nbytes", "all_reduce_model", zero=True)
    if algorithm == "tree":
        depth = math.ceil(math.log2(n)) if n > 1 else 0
        sent = 2 * s if n > 1 else 0.0
        return Model("tree", n, s, name, 2 * depth, sent, 2 * depth * alpha, sent / bw, (s if n > 1 else 0) * gamma)
    steps = schedule(algorithm, n, s, chunks)
    sent = sum(st.nbytes for st in steps)  # each step's messages travel at once, the steps one after another
    reduced = sum(st.nbytes for st in steps if st.reduce)
    reduce_s = reduced * gamma
    if algorithm == "ring_pipelined" and steps:  # per ring step one piece is reduced in the open, the others under
        piece = steps[0].nbytes               # the next piece's transfer (only a reduction slower than it shows)
        reduce_s = (n - 1) * (piece * gamma + (chunks - 1) * piece * max(0.0, gamma - 1 / bw))
    return Model(algorithm, n, s, name, len(steps), sent, len(steps) * alpha, sent / bw, reduce_s)


def model_events(algorithm: str, world: int, nbytes: float, link: hardware.Link | str = "nvlink4", *,
                 chunks: int = 4, reduce_gbs: float | None = None) -> list[dict[str, Any]]:
    """Return the model's timeline of one all-reduce: per rank, its send, recv and reduce ("compute") spans.

    Each event is a dict ``rank, op ('send' | 'recv' | 'compute'), peer, bytes, t_start, t_end`` (seconds from 0),
    the shape of :mod:`workbench.comm_pictures`' timelines. Steps run one after another; within a step every rank
    sends and receives at once for ``alpha + b / B``, then reduces for ``b / R`` (when ``reduce_gbs`` is given).
    """
    spec = hardware.get_link(link)
    bw, alpha = spec.bandwidth_gbs * 1e9, spec.latency_us * 1e-6
    gamma = 0.0 if reduce_gbs is None else 1 / (_positive(reduce_gbs, "reduce_gbs", "model_events") * 1e9)
    events: list[dict[str, Any]] = []
    t = 0.0
    for st in schedule(algorithm, world, nbytes, chunks):
        dt = alpha + st.nbytes / bw
        for src, dst in st.pairs:
            events.append(dict(rank=src, op="send", peer=dst, bytes=st.nbytes, t_start=t, t_end=t + dt))
            events.append(dict(rank=dst, op="recv", peer=src, bytes=st.nbytes, t_start=t, t_end=t + dt))
        t += dt
        if st.reduce and gamma:
            dr = st.nbytes * gamma
            for _, dst in st.pairs:
                events.append(dict(rank=dst, op="compute", peer=None, bytes=st.nbytes, t_start=t, t_end=t + dr))
            t += dr
    return events


def fit_alpha_beta(nbytes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Return the least-squares line ``t = a + S * b`` through measured (size, time) points: (a in s, b in s/B).

    A negative intercept (noise at small sizes) is clipped to 0 and the slope refitted through the origin.
    """
    xs = [_positive(x, "nbytes", "fit_alpha_beta", zero=True) for x in nbytes]
    ys = [_positive(y, "seconds", "fit_alpha_beta") for y in seconds]
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(f"fit_alpha_beta: needs one time per size and >= 2 distinct sizes, got {len(xs)} sizes "
                         f"({len(set(xs))} distinct) and {len(ys)} times")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    if a < 0 or b <= 0:
        a, b = max(a, 0.0), sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    return a, b


# ------------------------------------------------------------------------------------------------ napkin math


def grad_sync_model(params_b: float, world: int, link: hardware.Link | str = "nvlink4", *, dtype_bytes: int = 2,
                    algorithm: str = "ring") -> Model:
    """Return the model of all-reducing a ``params_b`` billion-parameter model's gradients (data parallelism)."""
    nbytes = _positive(params_b, "params_b", "grad_sync_model") * 1e9 * dtype_bytes
    return all_reduce_model(algorithm, nbytes, world, link)


def tp_allreduce_vs_gemm(tokens: int, hidden: int, tp: int, device: str = "H200", link: str = "nvlink4", *,
                         ffn_mult: int = 4, dtype: str = "bfloat16", algorithm: str = "ring") -> dict[str, float]:
    """Return the model's times of a tensor-parallel MLP's second GEMM and the all-reduce that follows it.

    The row-parallel down projection on each of ``tp`` ranks is ``[tokens, ffn_mult * hidden / tp] x
    [ffn_mult * hidden / tp, hidden]`` at the device's dense datasheet peak (a roofline floor: max of FLOPs / peak
    and bytes / HBM bandwidth); its ``[tokens, hidden]`` partial sums are then all-reduced over ``link``. Returns
    ``gemm_s``, ``allreduce_s`` and ``ratio`` (all-reduce over GEMM): > 1 means the communication costs more.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 2:
        raise ValueError(f"tp_allreduce_vs_gemm: tp must be an int >= 2 (one rank has nothing to all-reduce), "
                         f"got {tp!r}")
    t, h = int(_positive(tokens, "tokens", "tp_allreduce_vs_gemm")), int(_positive(hidden, "hidden",
                                                                               "tp_allreduce_vs_gemm"))
    e = 2 if dtype in ("bfloat16", "float16") else 4
    k = ffn_mult * h // tp
    flops = 2.0 * t * k * h
    moved = (t * k + k * h + t * h) * e
    gemm = max(flops / (hardware.peak_tflops(device, dtype) * 1e12), moved / (hardware.peak_bandwidth(device) * 1e9))
    ar = all_reduce_model(algorithm, t * h * e, tp, link).seconds
    return {"gemm_s": gemm, "allreduce_s": ar, "ratio": ar / gemm, "flops": flops, "allreduce_bytes": t * h * e}


def tp_crossover_hidden(tp: int, device: str = "H200", link: str = "nvlink4", *, ffn_mult: int = 4,
                        dtype: str = "bfloat16") -> float:
    """Return the hidden size below which the TP all-reduce's bandwidth term outlasts its compute-bound GEMM.

    Many tokens (both terms linear in them, alphas negligible): all-reduce ``2(tp-1)/tp * T h e / B`` against GEMM
    ``2 T (ffn_mult h / tp) h / F``, equal at ``h = (tp - 1) e F / (ffn_mult B)``.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 2:
        raise ValueError(f"tp_crossover_hidden: tp must be an int >= 2, got {tp!r}")
    e = 2 if dtype in ("bfloat16", "float16") else 4
    f = hardware.peak_tflops(device, dtype) * 1e12
    b = hardware.get_link(link).bandwidth_gbs * 1e9
    return (tp - 1) * e * f / (ffn_mult * b)


def ring_attention_events(seq: int, heads: int, head_dim: int, world: int, *, causal: bool = True,
                          overlapped: bool = True, device: str = "H200", link: str = "nvlink4",
                          dtype: str = "bfloat16", batch: int = 1) -> list[dict[str, Any]]:
    """Return the model's timeline of ring attention over ``seq`` tokens on ``world`` GPUs (contiguous shards).

    A block's attention costs ``4 B H S^2 D`` FLOPs at the device's dense peak (half on the causal diagonal, none
    for a fully masked block), its K/V transfer ``alpha + 2 B H S D e / B_link``. A transfer from rank r - 1 to
    rank r starts once both have posted it: blocking ranks post after their compute, overlapped ranks before it
    (and wait after it). So a rank with little to compute still waits for its neighbours' blocks: the busiest rank
    sets the pace. Events as in :func:`model_events` (ops compute, send, recv, wait).
    """
    n = _world(world, "ring_attention_events")
    if seq % n:
        raise ValueError(f"ring_attention_events: seq = {seq} must split into {n} equal shards")
    s = seq // n
    e = 2 if dtype in ("bfloat16", "float16") else 4
    spec = hardware.get_link(link)
    t_full = 4.0 * batch * heads * s * s * head_dim / (hardware.peak_tflops(device, dtype) * 1e12)
    nbytes = 2 * batch * heads * s * head_dim * e
    t_xfer = spec.latency_us * 1e-6 + nbytes / (spec.bandwidth_gbs * 1e9)
    events: list[dict[str, Any]] = []
    start = [0.0] * n  # when each rank begins the step
    for step in range(n):
        comp = []
        for rank in range(n):
            src = (rank - step) % n
            frac = 1.0 if not causal or src < rank else (0.5 if src == rank else 0.0)
            comp.append(t_full * frac)
            if comp[rank]:
                events.append(dict(rank=rank, op="compute", peer=None, bytes=0, t_start=start[rank],
                                   t_end=start[rank] + comp[rank], note=f"block of rank {src}"))
        done = [start[r] + comp[r] for r in range(n)]
        if step == n - 1:
            break
        posted = start if overlapped else done  # when each rank posts its isend and irecv
        xfer_start = [max(posted[(r - 1) % n], posted[r]) for r in range(n)]  # the message from r - 1 to r
        nxt = []
        for rank in range(n):
            right = (rank + 1) % n
            recv0, send0 = xfer_start[rank], xfer_start[right]
            events.append(dict(rank=rank, op="recv", peer=(rank - 1) % n, bytes=nbytes, t_start=recv0,
                               t_end=recv0 + t_xfer))
            events.append(dict(rank=rank, op="send", peer=right, bytes=nbytes, t_start=send0, t_end=send0 + t_xfer))
            end = max(done[rank], recv0 + t_xfer, send0 + t_xfer)
            idle_from = done[rank] if overlapped else posted[rank]
            if end > idle_from and (overlapped or recv0 > posted[rank] or send0 > posted[rank]):
                events.append(dict(rank=rank, op="wait", peer=(rank - 1) % n, bytes=nbytes, t_start=idle_from,
                                   t_end=end))
            nxt.append(end)
        start = nxt
    return events
