"""Measure the fused-MoE performance goals on a GPU: Mixtral prefill and DeepSeek-V3 decode, in bfloat16.

Goals (issue "Notebook 04 — fused Mixture-of-Experts"), for ``moe/triton_fused``:

- prefill, Mixtral-8x7B (T = 4096, E = 8, top 2, d = 4096, I = 14336): at least 1.0x ``torch_grouped_mm``, and at
  least 70% of the TFLOP/s of a dense ``torch.matmul`` with the same FLOPs: [T*top_k, d] @ [d, 3I], i.e.
  2 * 8192 * 4096 * 43008 = 2.9 TFLOP, the same 6*T*top_k*d*I as the MoE;
- decode, DeepSeek-V3 (E = 256, top 8, d = 7168, I = 2048; T = 64, also 1 and 16 for the record): the expert
  weights actually read (3*I*d*2 bytes = 88 MB per expert hit, ~220 experts hit at T = 64) per second, at least
  70% of the measured device copy bandwidth, and at least 5x ``torch_loop``.

The fp8 stretch (``moe_fp8/triton_block``, DeepSeek-V3's block-scaled recipe) is timed at the same shapes for the
record, with no goal of the issue's: against the bf16 fused kernel, against a dense fp8 matmul of the same FLOPs
(``gemm_fp8/torch_scaled``, cuBLASLt) at prefill, and its e4m3 weight bytes per second against the copy bandwidth
at decode. It goes under ``fp8_stretch`` in the goal summary.

Every variant is checked against the float64 reference before it is timed (``workbench.bench``); the autotuned
kernels are tuned once per goal shape and checked with the config they chose (``workbench.benchmark_goals.tuned_once``).
Writes two files: ``<out-dir>/<gpu>-<date>-moe.json``, the timed records (``results/README.md`` format, with
provenance), and ``<out-dir>/goals/moe-<gpu>-<date>.json``, the measured ceilings and each goal's ratio, both again
after every measurement (a run stopped by a time limit keeps what it measured; SIGTERM is noted, exit status 143).
``scripts/import-gpu-results.py`` copies them into ``results/`` after reading them. Without a GPU it refuses (a
GPU figure must come from a GPU) unless ``--smoke``, which runs the plumbing at cpu-mode sizes with the torch
variants only and writes nothing into ``results/``.

Usage: python benchmarks/moe_goals.py [--out-dir out/moe-goals] [--smoke]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import torch

import workbench as wb
from kernels.moe.reference import CPU_SCALE, model_shape, route
from workbench.benchmark_goals import (
    COPY_BYTES,
    ROOT,
    GoalRun,
    Stopped,
    copy_bandwidth_gbs,
    refuse_without_gpu,
    stop_on_sigterm,
)

PREFILL = ("mixtral-8x7b", 4096)
DECODE = ("deepseek-v3", (1, 16, 64))
MOE_VARIANTS = ("triton_fused", "torch_grouped_mm", "torch_loop", "cuda_permute")
FP8_VARIANT = "triton_block"  # moe_fp8; its torch_dequant baseline stands in for the cpu smoke run


def experts_hit(shape: dict, dtype: torch.dtype) -> int:
    """Return how many experts the benchmark's own inputs (seed 0) route at least one token to."""
    x, logits, *_ = wb.make_inputs("moe", dtype=dtype, seed=0, **shape)
    return int(route(logits, shape["top_k"])[1].unique().numel())


def prefill(run: GoalRun, gpu: bool, dtype: torch.dtype, names: tuple[str, ...], scale: int) -> dict:
    """Time the Mixtral prefill: vs torch._grouped_mm and vs a dense matmul of the same FLOPs; return its shape."""
    goals = run.goals
    pshape = model_shape(PREFILL[0], PREFILL[1] if gpu else 64, scale)
    dense_shape = {"M": pshape["T"] * pshape["top_k"], "N": 3 * pshape["I"], "K": pshape["d"]}
    pre = goals["prefill"] = {"shape": pshape, "dense_matmul_shape": dense_shape, "times_ms": {}}
    recs = {}
    for n in names:
        recs[n] = run.time("moe", n, pshape, dtype)
        pre["times_ms"] = {x: r["time_ms"] for x, r in recs.items() if r}
    dense = run.time("gemm", "torch_matmul", dense_shape, dtype)
    if dense:
        pre.update(dense_matmul_ms=dense["time_ms"], dense_matmul_tflops=dense["tflops"])
    fused, grouped = recs.get("triton_fused"), recs.get("torch_grouped_mm")
    if fused and grouped:
        goals["goals"]["prefill_vs_grouped_mm"] = {"ratio": grouped["time_ms"] / fused["time_ms"], "goal": 1.0}
    if fused and dense and fused["tflops"] and dense["tflops"]:
        goals["goals"]["prefill_vs_dense_matmul"] = {"ratio": fused["tflops"] / dense["tflops"], "goal": 0.7}
    run.save()
    return {"shape": pshape, "dense_shape": dense_shape, "fused": fused}


def fp8_prefill(run: GoalRun, gpu: bool, fp8_name: str, pre: dict) -> None:
    """Time the fp8 stretch at prefill: vs the bf16 fused kernel and a dense fp8 matmul (cuBLASLt) of the same FLOPs."""
    fp8 = run.goals["fp8_stretch"]
    r8 = run.time("moe_fp8", fp8_name, pre["shape"], torch.bfloat16)
    if not r8:
        return
    fp8["prefill"] = {"time_ms": r8["time_ms"], "tflops": r8["tflops"]}
    if gpu:
        d8 = run.time("gemm_fp8", "torch_scaled", pre["dense_shape"], torch.bfloat16)
        if d8:
            fp8["prefill"]["dense_fp8_matmul_tflops"] = d8["tflops"]
            fp8["prefill"]["vs_dense_fp8_matmul"] = r8["tflops"] / d8["tflops"] if d8["tflops"] else None
        if pre["fused"]:
            fp8["prefill"]["speedup_vs_bf16_triton_fused"] = pre["fused"]["time_ms"] / r8["time_ms"]
    run.save()


def decode_one(run: GoalRun, t: int, last: bool, dtype: torch.dtype, names: tuple[str, ...], scale: int,
               fp8_name: str) -> None:
    """Time the DeepSeek-V3 decode at ``t`` tokens: expert-weight bytes per second vs the copy bandwidth."""
    goals, copy_gbs = run.goals, run.goals["copy_bandwidth_gbs"]
    dshape = model_shape(DECODE[0], t, scale)
    hit = experts_hit(dshape, dtype)
    wbytes = hit * 3 * dshape["I"] * dshape["d"] * torch.empty((), dtype=dtype).element_size()
    row = {"shape": dshape, "experts_hit": hit, "weight_bytes": wbytes, "times_ms": {}, "weight_gbs": {}}
    goals["decode"].append(row)
    dec = {}
    for n in names:
        dec[n] = run.time("moe", n, dshape, dtype)
        row["times_ms"] = {x: r["time_ms"] for x, r in dec.items() if r}
        row["weight_gbs"] = {x: wbytes / (r["time_ms"] * 1e-3) / 1e9 for x, r in dec.items() if r}
    fused, loop = dec.get("triton_fused"), dec.get("torch_loop")
    if last and fused:
        goals["goals"]["decode_weight_bandwidth"] = {"ratio": row["weight_gbs"]["triton_fused"] / copy_gbs,
                                                     "goal": 0.7}
        if loop:
            goals["goals"]["decode_vs_torch_loop"] = {"ratio": loop["time_ms"] / fused["time_ms"], "goal": 5.0}
    r8 = run.time("moe_fp8", fp8_name, dshape, torch.bfloat16)
    if r8:
        b8 = hit * 3 * dshape["I"] * dshape["d"]  # e4m3: 1 B per weight (the block scales add 0.03%)
        gbs8 = b8 / (r8["time_ms"] * 1e-3) / 1e9
        row8 = {"T": t, "weight_bytes": b8, "time_ms": r8["time_ms"], "weight_gbs": gbs8,
                "vs_copy_bandwidth": gbs8 / copy_gbs}
        if fused:
            row8["speedup_vs_bf16_triton_fused"] = fused["time_ms"] / r8["time_ms"]
        goals["fp8_stretch"]["decode"].append(row8)
    run.save()


def measure(run: GoalRun, gpu: bool) -> None:
    """Run every section in order, saving after each measurement."""
    dtype = torch.bfloat16 if gpu else torch.float32
    scale = 1 if gpu else CPU_SCALE
    names = MOE_VARIANTS if gpu else ("torch_grouped_mm", "torch_loop")
    fp8_name = FP8_VARIANT if gpu else "torch_dequant"
    run.goals.update({"dtype": str(dtype).replace("torch.", ""), "mode": wb.mode()})
    run.goals["fp8_stretch"] = {"variant": f"moe_fp8/{fp8_name}", "dtype": "bfloat16", "prefill": {}, "decode": []}
    pre = prefill(run, gpu, dtype, names, scale)
    fp8_prefill(run, gpu, fp8_name, pre)
    run.goals["copy_bandwidth_gbs"] = copy_bandwidth_gbs(COPY_BYTES if gpu else 64 * 2**20)
    run.goals["decode"] = []
    ts = DECODE[1] if gpu else (4,)
    for t in ts:
        decode_one(run, t, t == max(ts), dtype, names, scale, fp8_name)


def main(argv: list[str] | None = None) -> int:
    """Run the goal measurements and write the records and the goal summary."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", type=Path, default=ROOT / "out" / "moe-goals")
    p.add_argument("--smoke", action="store_true", help="no GPU: check the plumbing at cpu-mode sizes (torch only)")
    a = p.parse_args(argv)
    refused = refuse_without_gpu("moe_goals", a.smoke, a.out_dir)
    if refused is not None:
        return refused
    command = "python benchmarks/moe_goals.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stop_on_sigterm()
    run = GoalRun("moe", a.out_dir, command)
    try:
        measure(run, wb.mode() == "gpu")
    except Stopped as e:
        run.finish(e)
        print(f"moe_goals: {e}; what finished is saved", file=sys.stderr)
        return 128 + signal.SIGTERM
    run.finish()
    fp8 = run.goals["fp8_stretch"]
    for k, v in fp8["prefill"].items():
        if v is not None:
            print(f"fp8 stretch, prefill: {k:<30} {v:.3g}")
    for row8 in fp8["decode"]:
        print("fp8 stretch, decode: " + ", ".join(f"{k} {v:.3g}" for k, v in row8.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
