"""Measure the H200 goals of the GEMM, softmax, FlashAttention, decode, norms and CuTe notebooks: ratios from one run.

GEMM (issue "Notebook 01"), against ``torch.matmul`` (cuBLAS) at the same shape and dtype:
- Triton bf16 (the faster of ``triton_autotuned`` and ``triton_persistent_tma`` per shape): >= 0.95 at 8192^3,
  and a geometric mean >= 0.90 over 4096^3, 8192^3 and M = 8192 with N = K in {4096, 14336};
- CUDA C SIMT fp32 (``cuda_warptile``) >= 0.90 of cuBLAS SGEMM with TF32 off, at 4096^3;
- ``cuda_mma_sync`` bf16 >= 0.60, and (stretch) ``cuda_wgmma_tma`` bf16 >= 0.90, at 4096^3.

Softmax (issue "Notebook 02"), bf16, rows of N in {1k, 4k, 16k, 64k} with 2^27 elements (256 MiB) per call:
- CUDA C (fastest registered CUDA C variant per N) >= 0.90 and Triton (fastest) >= 0.85 of the measured copy
  bandwidth, counting bytes read plus written;
- Triton >= 1.1x ``torch.softmax`` for N from 1k to 16k; the looped ``triton_online`` >= 0.75 of copy at 64k.

FlashAttention (issue "Notebook 03"), bf16, TFLOP/s by the FA papers' count, against the fastest SDPA backend:
- ``triton_fa2`` forward, D = 128, non-causal, S = 8k and 16k: >= 0.90 (stretch 1.0);
- causal (D = 128, S = 8k) and D = 64 (non-causal, S = 8k): >= 0.80;
- ``triton_fa2_bwd`` >= 0.70 of the fastest backward baseline (D = 128, S = 8k).

Decode attention (issue 30, notebook 06), bf16, B = 8 sequences of 8192 tokens each (make's input case "full"),
Hq = 32, Hkv = 8, D = 128, page 16, against a device-to-device copy of the same bytes as the KV cache:
- ``triton_split``: K and V bytes it must read (2 * B * L * Hkv * D * 2 B = 268 MB) per second >= 0.85 of the copy
  bandwidth (bytes read + written per second); reported beside torch SDPA on a dense [B, Hkv, L, D] cache
  (``enable_gqa``, no gather), the registered ``torch_sdpa`` (gather included), FlashInfer's paged decode if
  ``flashinfer`` is importable, and the other decode kernels (``triton_gqa_dot``, ``cuda_gqa``, ``cuda_split``).

Norms and quantized GEMM (issue 31, notebook 07), bf16, M = 8192 rows of N = 4096, bytes read plus written (the
op's byte count) per second against the measured copy bandwidth:
- LayerNorm forward and fused add+RMSNorm in Triton (the fastest Triton variant of each) >= 0.85 of the copy
  bandwidth (QuACK reports about 90% of H100 bandwidth);
- the deterministic LayerNorm backward (the fastest non-torch variant registered ``deterministic=True``) >= 0.70;
- the w8a8 GEMM (the fastest non-torch ``gemm_w8a8`` variant) >= 1.6x bf16 ``torch.matmul`` at 8192^3.

CuTe DSL (issue 33, notebook 09), bf16 at 8192^3: ``cute_wgmma_tma`` >= 0.85 of ``torch.matmul`` in the same run
(``cuda_wgmma_tma`` timed beside it). It needs ``nvidia-cutlass-dsl`` in the GPU box's Python or, since the box
lacks it, the ahead-of-time build ``python -m kernels._cute_aot`` makes here (carry ``out/cute-aot``); without
either the goal file says so in its notes.

Every variant is checked before it is timed (``workbench.bench``); an autotuned kernel is tuned once, at the goal
shape, and checked with the config it chose (``workbench.benchmark_goals.tuned_once``). Writes
``<gpu>-<date>-<op>.json`` and ``goals/<op>-<gpu>-<date>.json`` per op into ``--out-dir``, again after every
measurement, so a run stopped by a time limit keeps what it measured (SIGTERM is caught: the goal file then notes
where it stopped, exit status 143).
``scripts/import-gpu-results.py`` copies them into ``results/`` after reading them. Without a GPU it refuses
unless ``--smoke`` (cpu-mode sizes, torch variants only, nothing into ``results/``).

Usage: python benchmarks/kernel_goals.py [--op gemm,softmax,attention,decode,norms,cute] [--out-dir DIR]
       [--smoke]
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import torch

import workbench as wb
from workbench.benchmark_goals import (
    COPY_BYTES,
    ROOT,
    GoalRun,
    Stopped,
    copy_bandwidth_gbs,
    geomean,
    refuse_without_gpu,
    stop_on_sigterm,
    time_call,
)

BF16, FP32 = torch.bfloat16, torch.float32


def _best(recs: dict[str, dict | None], names: tuple[str, ...]) -> tuple[str, dict] | None:
    got = [(n, recs[n]) for n in names if recs.get(n)]
    return min(got, key=lambda nr: nr[1]["time_ms"]) if got else None


def _ratio(goals: dict, key: str, base: dict | None, mine: tuple[str, dict] | None, goal: float, **extra) -> None:
    """Record time(base) / time(mine) as goal ``key`` when both were measured on a GPU."""
    if base and mine and not base["emulated"] and not mine[1]["emulated"]:
        goals["goals"][key] = {"ratio": base["time_ms"] / mine[1]["time_ms"], "goal": goal, "variant": mine[0],
                               **extra}


def _named(recs: dict[str, dict | None], name: str) -> tuple[str, dict] | None:
    return (name, recs[name]) if recs.get(name) else None


def gemm_goals(run: GoalRun, gpu: bool) -> None:
    """Time the GEMM goal shapes into ``run`` (records saved as each finishes, goal ratios as they are known)."""
    torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS SGEMM in true fp32, like the SIMT kernels
    torch.backends.cudnn.allow_tf32 = False
    triton = ("triton_autotuned", "triton_persistent_tma")
    if gpu:
        bf16_shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (8192, 14336, 14336)]
        sq = (4096, 4096, 4096)
        names16 = ("torch_matmul", *triton, "cuda_mma_sync", "cuda_wgmma_tma")
    else:
        bf16_shapes, sq, names16 = [(64, 64, 64)], (64, 64, 64), ("torch_matmul",)
    goals = run.goals
    goals.update({"op": "gemm", "mode": wb.mode(), "times_ms": {}})
    ratios = []
    dt = BF16 if gpu else FP32
    for m, n, k in bf16_shapes:
        shape = {"M": m, "N": n, "K": k}
        label = f"{m}x{n}x{k} {str(dt)[6:]}"
        recs: dict[str, dict | None] = {}
        for v in names16:
            if (m, n, k) == sq or v in ("torch_matmul", *triton):
                recs[v] = run.time("gemm", v, shape, dt)
                goals["times_ms"][label] = {x: r["time_ms"] for x, r in recs.items() if r}
        best = _best(recs, triton)
        base = recs.get("torch_matmul")
        if best and base:
            ratios.append(base["time_ms"] / best[1]["time_ms"])
        if (m, n, k) == (8192, 8192, 8192):
            _ratio(goals, "triton_bf16_8192^3", base, best, 0.95)
        if (m, n, k) == sq:
            _ratio(goals, "mma_sync_bf16_4096^3", base, _named(recs, "cuda_mma_sync"), 0.60)
            _ratio(goals, "wgmma_tma_bf16_4096^3 (stretch)", base, _named(recs, "cuda_wgmma_tma"), 0.90)
        run.save()
    if gpu and len(ratios) == len(bf16_shapes):
        goals["goals"]["triton_bf16_geomean"] = {"ratio": geomean(ratios), "goal": 0.90,
                                                 "shapes": [list(s) for s in bf16_shapes]}
    shape = {"M": sq[0], "N": sq[1], "K": sq[2]}
    recs = {}
    for v in (("torch_matmul", "cuda_warptile") if gpu else ("torch_matmul",)):
        recs[v] = run.time("gemm", v, shape, FP32)
        goals["times_ms"][f"{sq[0]}^3 float32 (TF32 off)"] = {x: r["time_ms"] for x, r in recs.items() if r}
    _ratio(goals, "simt_fp32_4096^3", recs.get("torch_matmul"), _named(recs, "cuda_warptile"), 0.90)


def softmax_goals(run: GoalRun, gpu: bool) -> None:
    """Time softmax over N in {1k, 4k, 16k, 64k} into ``run``."""
    cuda_c = tuple(v.name for v in wb.variants("softmax") if v.backend == "cuda")
    triton = tuple(v.name for v in wb.variants("softmax") if v.backend == "triton")
    copy = copy_bandwidth_gbs(COPY_BYTES if gpu else 64 * 2**20)
    goals = run.goals
    goals.update({"op": "softmax", "mode": wb.mode(), "copy_bandwidth_gbs": copy, "gbs": {}})
    total = 2**27 if gpu else 2**14
    names = ("torch_softmax", *cuda_c, *triton) if gpu else ("torch_softmax",)
    dt = BF16 if gpu else FP32
    for n in (1024, 4096, 16384, 65536) if gpu else (1024,):
        shape = {"M": total // n, "N": n}
        recs: dict[str, dict | None] = {}
        for v in names:
            recs[v] = run.time("softmax", v, shape, dt)
            goals["gbs"][n] = {x: r["gbps"] for x, r in recs.items() if r and r["gbps"]}
        for label, group, goal in (("cuda_c", cuda_c, 0.90), ("triton", triton, 0.85)):
            best = _best(recs, group)
            if best and not best[1]["emulated"]:
                goals["goals"][f"{label}_vs_copy_N={n}"] = {"ratio": best[1]["gbps"] / copy, "goal": goal,
                                                             "variant": best[0]}
        if n <= 16384:
            _ratio(goals, f"triton_vs_torch_N={n}", recs.get("torch_softmax"), _best(recs, triton), 1.1)
        online = recs.get("triton_online")
        if n >= 65536 and online and not online["emulated"]:
            goals["goals"][f"triton_online_vs_copy_N={n}"] = {"ratio": online["gbps"] / copy, "goal": 0.75}
        run.save()


SDPA = ("torch_sdpa_flash", "torch_sdpa_cudnn", "torch_sdpa_efficient", "torch_sdpa")


def attention_goals(run: GoalRun, gpu: bool) -> None:
    """Time FlashAttention forward/backward at the goal shapes into ``run``."""
    goals = run.goals
    goals.update({"op": "attention", "mode": wb.mode(), "tflops": {}})
    dt = BF16 if gpu else FP32
    if gpu:
        fwd = [("d128_S8k", {"B": 2, "H": 16, "Sq": 8192, "Sk": 8192, "D": 128, "causal": False}, 0.90),
               ("d128_S16k", {"B": 1, "H": 16, "Sq": 16384, "Sk": 16384, "D": 128, "causal": False}, 0.90),
               ("d128_S8k_causal", {"B": 2, "H": 16, "Sq": 8192, "Sk": 8192, "D": 128, "causal": True}, 0.80),
               ("d64_S8k", {"B": 2, "H": 32, "Sq": 8192, "Sk": 8192, "D": 64, "causal": False}, 0.80)]
        bwd = {"B": 2, "H": 16, "Sq": 8192, "Sk": 8192, "D": 128, "causal": False}
        names = (*SDPA, "triton_fa2")
    else:
        fwd = [("smoke", {"B": 1, "H": 2, "Sq": 64, "Sk": 64, "D": 32, "causal": False}, 0.90)]
        bwd = {"B": 1, "H": 2, "Sq": 64, "Sk": 64, "D": 32, "causal": False}
        names = ("torch_sdpa",)
    for label, shape, goal in fwd:
        recs: dict[str, dict | None] = {}
        for v in names:
            recs[v] = run.time("attention", v, shape, dt)
            goals["tflops"][label] = {x: r["tflops"] for x, r in recs.items() if r}
        base = _best(recs, SDPA)
        _ratio(goals, f"fwd_{label}", base[1] if base else None, _named(recs, "triton_fa2"), goal,
               baseline=base[0] if base else None)
        run.save()
    bnames = ("torch_flash_bwd", "torch_autograd", "triton_fa2_bwd") if gpu else ("torch_autograd",)
    recs = {}
    for v in bnames:
        recs[v] = run.time("attention_bwd", v, bwd, dt)
        goals["tflops"]["bwd_d128_S8k"] = {x: r["tflops"] for x, r in recs.items() if r}
    # torch_autograd re-runs the forward under autograd (its time includes it); torch_flash_bwd is the backward
    # kernel alone, the fair baseline when it runs.
    base = _best(recs, ("torch_flash_bwd",)) or _best(recs, ("torch_autograd",))
    _ratio(goals, "bwd_d128_S8k", base[1] if base else None, _named(recs, "triton_fa2_bwd"), 0.70,
           baseline=base[0] if base else None)


DECODE_GOAL = {"B": 8, "Hq": 32, "Hkv": 8, "L": 8192, "D": 128, "page": 16}
DECODE_SMOKE = {"B": 2, "Hq": 4, "Hkv": 2, "L": 40, "D": 32, "page": 16}
DECODE_KERNELS = ("triton_split", "triton_gqa_dot", "cuda_gqa", "cuda_split")  # the goal's first


def kv_bytes(shape: dict, dtype: torch.dtype) -> int:
    """Return the K and V bytes a decode step must read: every token of every sequence, each KV head once."""
    return 2 * shape["B"] * shape["L"] * shape["Hkv"] * shape["D"] * torch.empty((), dtype=dtype).element_size()


def _dense_sdpa(inputs: tuple) -> Callable[[], torch.Tensor]:
    """Return SDPA over the same tokens held as a dense [B, Hkv, L, D] cache (no block table, no gather): the
    attention FlashInfer and our kernels do on pages, done where the cache is one contiguous block per head."""
    from kernels.decode_attention.reference import dense_kv

    q, k_cache, v_cache, table, lens = inputs
    k, v, _ = dense_kv(k_cache, v_cache, table, lens, int(lens.max()))
    k, v, q4 = k.contiguous(), v.contiguous(), q[:, :, None, :]  # every sequence L tokens: no mask
    return lambda: torch.nn.functional.scaled_dot_product_attention(q4, k, v, enable_gqa=True)[:, :, 0, :]


def _flashinfer(inputs: tuple) -> Callable[[], torch.Tensor]:
    """Return FlashInfer's paged decode (BatchDecodeWithPagedKVCacheWrapper, NHD: our layout) on the same pages;
    ImportError when flashinfer is not installed."""
    import flashinfer

    q, k_cache, v_cache, table, lens = inputs
    page, hkv, d = k_cache.shape[1:]
    n_pages = (lens + page - 1) // page
    indptr = torch.cat([n_pages.new_zeros(1), n_pages.cumsum(0)]).int()
    indices = torch.cat([table[b, :n] for b, n in enumerate(n_pages.tolist())]).int()
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        torch.empty(128 * 2**20, dtype=torch.uint8, device=q.device), "NHD")
    wrapper.plan(indptr, indices, (lens - (n_pages - 1) * page).int(), q.shape[1], hkv, d, page,
                 q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    return lambda: wrapper.run(q, (k_cache, v_cache))


def _baseline(run: GoalRun, label: str, build: Callable[[tuple], Callable[[], torch.Tensor]], inputs: tuple,
              ref: torch.Tensor, kv: int) -> None:
    """Time a decode baseline that is no registered variant into ``run.goals`` (after checking its output against
    the float64 reference on the same inputs); a baseline that cannot run here or is wrong leaves a note."""
    from kernels.decode_attention.reference import tolerance
    from workbench.checker import close_to

    try:
        fn = build(inputs)
        atol, rtol = tolerance(inputs[0].dtype, {})
        if not close_to(fn().double(), ref, atol, rtol):
            run.notes.append(f"decode baseline {label}: its output does not match the reference; not timed")
            return
        med, p20, p80 = time_call(fn)
    except Exception as e:  # flashinfer missing, an SDPA without enable_gqa: say so, keep measuring
        run.notes.append(f"decode baseline {label}: not measured ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
        return
    base = {"time_ms": med, "p20_ms": p20, "p80_ms": p80}
    if wb.mode() == "gpu":
        base["kv_gbs"] = kv / (med * 1e-3) / 1e9
    run.goals["baselines"][label] = base
    run.save()


def decode_goals(run: GoalRun, gpu: bool) -> None:
    """Time paged decode attention at the goal shape into ``run``: the Triton split-KV goal against a device copy
    of the KV cache's bytes, then the baselines and the other decode kernels for the record."""
    from kernels.decode_attention.reference import FULL, make, reference

    shape, dt = (DECODE_GOAL, BF16) if gpu else (DECODE_SMOKE, FP32)
    kv = kv_bytes(shape, dt)
    goals = run.goals
    goals.update({"op": "decode_attention", "mode": wb.mode(), "shape": shape, "dtype": str(dt)[6:],
                  "inputs": f"make case {FULL!r}: every sequence L tokens, pages shuffled", "kv_bytes": kv,
                  "copy_bytes": kv, "copy_bandwidth_gbs": copy_bandwidth_gbs(kv), "kv_gbs": {}, "baselines": {}})
    for name in DECODE_KERNELS if gpu else ("torch_sdpa",):  # the smoke run: the registered torch baseline only
        rec = run.time("decode_attention", name, shape, dt, case=FULL)
        if rec and not rec["emulated"]:
            goals["kv_gbs"][name] = kv / (rec["time_ms"] * 1e-3) / 1e9
            if name == "triton_split":
                goals["goals"]["triton_split_kv_vs_copy"] = {
                    "ratio": goals["kv_gbs"][name] / goals["copy_bandwidth_gbs"], "goal": 0.85, "variant": name}
        run.save()
    inputs = make(shape, dt, 0, wb.device(), case=FULL)
    ref = reference(*inputs)
    for label, build in (("torch SDPA, dense cache", _dense_sdpa), ("flashinfer paged decode", _flashinfer)):
        _baseline(run, label, build, inputs, ref, kv)
    if gpu:
        run.time("decode_attention", "torch_sdpa", shape, dt, case=FULL)  # the registered one: gather included


NORM_GOAL = {"M": 8192, "N": 4096}
NORM_SMOKE = {"M": 8, "N": 64}
# op, the goal's kernels (the fastest counts), its ratio of the copy bandwidth
NORM_OPS = (("layernorm", "triton", 0.85), ("add_rmsnorm", "triton", 0.85), ("layernorm_bwd", "deterministic", 0.70))
W8A8_GOAL, W8A8_SMOKE = {"M": 8192, "N": 8192, "K": 8192}, {"M": 32, "N": 32, "K": 64}


def _goal_kernels(op: str, kind: str) -> tuple[str, ...]:
    """Return the registered variants a norm goal is about: its Triton ones, or its deterministic non-torch ones."""
    vs = wb.variants(op)
    if kind == "triton":
        return tuple(v.name for v in vs if v.backend == "triton")
    return tuple(v.name for v in vs if v.backend != "torch" and getattr(v, "deterministic", None))


def norms_goals(run: GoalRun, gpu: bool) -> None:
    """Time LayerNorm, add+RMSNorm and the deterministic LayerNorm backward against the copy bandwidth, and the
    w8a8 GEMM against bf16 torch.matmul, into ``run``."""
    shape, dt = (NORM_GOAL, BF16) if gpu else (NORM_SMOKE, FP32)
    goals = run.goals
    goals.update({"op": "norms", "mode": wb.mode(), "shape": shape, "dtype": str(dt)[6:],
                  "copy_bandwidth_gbs": copy_bandwidth_gbs(COPY_BYTES if gpu else 64 * 2**20), "gbs": {}})
    for op, kind, goal in NORM_OPS:
        mine = _goal_kernels(op, kind)
        baselines = tuple(v.name for v in wb.variants(op) if v.backend == "torch")
        recs = {v: run.time(op, v, shape, dt) for v in ((*baselines, *mine) if gpu else baselines[:1])}
        goals["gbs"][op] = {x: r["gbps"] for x, r in recs.items() if r and r["gbps"]}
        best = _best(recs, mine)
        if best and not best[1]["emulated"]:
            goals["goals"][f"{op}_{kind}_vs_copy"] = {
                "ratio": best[1]["gbps"] / goals["copy_bandwidth_gbs"], "goal": goal, "variant": best[0]}
        run.save()
    w8 = W8A8_GOAL if gpu else W8A8_SMOKE
    base = run.time("gemm", "torch_matmul", w8, BF16 if gpu else FP32)
    torch_w8 = tuple(v.name for v in wb.variants("gemm_w8a8") if v.backend == "torch")
    kernels = tuple(v.name for v in wb.variants("gemm_w8a8") if v.backend != "torch")
    # gemm_w8a8 takes int8 a and b with fp32 scales; its op dtype is the bf16 output
    recs = {v: run.time("gemm_w8a8", v, w8, BF16) for v in ((*torch_w8, *kernels) if gpu else torch_w8)}
    goals["times_ms"] = {"gemm bf16 torch_matmul": base["time_ms"] if base else None,
                         **{f"gemm_w8a8 {x}": r["time_ms"] for x, r in recs.items() if r}}
    _ratio(goals, "w8a8_vs_bf16_matmul_8192^3", base, _best(recs, kernels), 1.6)


CUTE_GOAL, CUTE_SMOKE = {"M": 8192, "N": 8192, "K": 8192}, {"M": 64, "N": 64, "K": 64}


def cute_missing() -> str | None:
    """Return why ``cute_wgmma_tma`` cannot run in this Python: neither the CuTe DSL (the GPU box lacks it, and its
    92 MB wheel is over what a run may carry) nor an ahead-of-time build of it (``kernels/_cute_aot.py``); or None."""
    import importlib.util

    from kernels import _cute_aot

    if importlib.util.find_spec("cutlass") is None and (why := _cute_aot.problem("cute_wgmma_tma", BF16)):
        return (f"nvidia-cutlass-dsl is not installed in this Python and {why}: build it where the DSL is "
                "(python -m kernels._cute_aot) and carry out/cute-aot")
    return None


def cute_goals(run: GoalRun, gpu: bool) -> None:
    """Time the CuTe DSL Hopper GEMM (``cute_wgmma_tma``) against ``torch.matmul`` at 8192^3 bf16 into ``run``
    (goal: >= 0.85), beside ``cuda_wgmma_tma``; in smoke mode torch alone at 64^3, as the CuTe kernels run on a GPU
    only."""
    shape, dt = (CUTE_GOAL, BF16) if gpu else (CUTE_SMOKE, FP32)
    goals = run.goals
    goals.update({"op": "cute", "mode": wb.mode(), "shape": shape, "dtype": str(dt)[6:], "times_ms": {}})
    why = cute_missing()
    if why:  # nothing to compare: leave the GPU time to the other steps
        run.notes.append(why)
        run.save()
        return
    names = ("torch_matmul", "cuda_wgmma_tma", "cute_wgmma_tma")
    recs = {v: run.time("gemm", v, shape, dt) for v in (names if gpu else names[:1])}
    goals["times_ms"] = {x: r["time_ms"] for x, r in recs.items() if r}
    _ratio(goals, "cute_wgmma_tma_bf16_8192^3", recs.get("torch_matmul"), _named(recs, "cute_wgmma_tma"), 0.85)
    run.save()


OPS: dict[str, Callable[[GoalRun, bool], None]] = {
    "gemm": gemm_goals, "softmax": softmax_goals, "attention": attention_goals, "decode": decode_goals,
    "norms": norms_goals, "cute": cute_goals}


def main(argv: list[str] | None = None) -> int:
    """Run the goal measurements of the chosen ops and write their records and goal summaries."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", default=",".join(OPS), help=f"comma-separated, from {', '.join(OPS)}")
    p.add_argument("--out-dir", type=Path, default=ROOT / "out" / "kernel-goals")
    p.add_argument("--smoke", action="store_true", help="no GPU: check the plumbing at cpu-mode sizes (torch only)")
    a = p.parse_args(argv)
    ops = [o.strip() for o in a.op.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        print(f"kernel_goals: unknown op(s) {bad}; expected some of {list(OPS)}", file=sys.stderr)
        return 2
    refused = refuse_without_gpu("kernel_goals", a.smoke, a.out_dir)
    if refused is not None:
        return refused
    command = "python benchmarks/kernel_goals.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stop_on_sigterm()
    for op in ops:
        run = GoalRun(op, a.out_dir, command)
        try:
            OPS[op](run, wb.mode() == "gpu")
        except Stopped as e:
            run.finish(e)
            print(f"kernel_goals: {e} during {op}; what finished is saved", file=sys.stderr)
            return 128 + signal.SIGTERM
        run.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
