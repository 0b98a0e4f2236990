"""Measure the fused-MoE performance goals on a GPU: Mixtral prefill and DeepSeek-V3 decode, in bfloat16.

Goals (issue "Notebook 04 — fused Mixture-of-Experts"), for ``moe/triton_fused``:

- prefill, Mixtral-8x7B (T = 4096, E = 8, top 2, d = 4096, I = 14336): at least 1.0x ``torch_grouped_mm``, and at
  least 70% of the TFLOP/s of a dense ``torch.matmul`` with the same FLOPs: [T*top_k, d] @ [d, 3I], i.e.
  2 * 8192 * 4096 * 43008 = 2.9 TFLOP, the same 6*T*top_k*d*I as the MoE;
- decode, DeepSeek-V3 (E = 256, top 8, d = 7168, I = 2048; T = 64, also 1 and 16 for the record): the expert
  weights actually read (3*I*d*2 bytes = 88 MB per expert hit, ~220 experts hit at T = 64) per second, at least
  70% of the measured device copy bandwidth, and at least 5x ``torch_loop``.

Every variant is checked against the float64 reference before it is timed (``workbench.bench``). Writes two files:
``<out-dir>/<gpu>-<date>-moe.json``, the timed records (``results/README.md`` format, with provenance), and
``<out-dir>/goals/moe-<gpu>-<date>.json``, the measured ceilings and each goal's ratio. Copy both into
``results/`` after reading them. Without a GPU it refuses (a GPU figure must come from a GPU) unless ``--smoke``,
which runs the plumbing at cpu-mode sizes with the torch variants only and writes nothing into ``results/``.

Usage: python benchmarks/moe_goals.py [--out-dir out/moe-goals] [--smoke]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

import torch

import workbench as wb
from kernels.moe.reference import CPU_SCALE, model_shape, route
from workbench.results import save_results

ROOT = Path(__file__).resolve().parents[1]
PREFILL = ("mixtral-8x7b", 4096)
DECODE = ("deepseek-v3", (1, 16, 64))
MOE_VARIANTS = ("triton_fused", "torch_grouped_mm", "torch_loop", "cuda_permute")
COPY_BYTES = 4 * 2**30  # 4 GiB: far beyond the 60 MB L2, so the copy streams from HBM


def copy_bandwidth_gbs(nbytes: int = COPY_BYTES) -> float:
    """Return the measured device-to-device copy bandwidth in GB/s (bytes read + bytes written per second)."""
    from workbench.timer import _quantiles, time_cpu, time_gpu

    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=wb.device())
    dst = torch.empty_like(src)
    timer = time_gpu if wb.mode() == "gpu" else time_cpu
    med = _quantiles(timer(lambda i: dst.copy_(src), 1))[0]
    return 2 * n * 4 / (med * 1e-3) / 1e9


def experts_hit(shape: dict, dtype: torch.dtype) -> int:
    """Return how many experts the benchmark's own inputs (seed 0) route at least one token to."""
    x, logits, *_ = wb.make_inputs("moe", dtype=dtype, seed=0, **shape)
    return int(route(logits, shape["top_k"])[1].unique().numel())


def timed(name: str, shape: dict, dtype: torch.dtype, command: str, notes: list[str]) -> dict | None:
    """Check then time moe/<name> at ``shape``; None (with a note) when it is missing or cannot run here."""
    try:
        v = wb.variant("moe", name)
    except KeyError as e:
        notes.append(f"moe/{name}: not registered ({e})")
        return None
    why = v.why_not_here(dtype, shape)
    if why:
        notes.append(f"moe/{name} at {shape}: {why}")
        return None
    rec = wb.bench(v, dtype=dtype, command=command, **shape)
    print(f"moe/{name:<18} T={shape['T']:<5} {rec['time_ms']:9.3f} ms  "
          + (f"{rec['tflops']:7.1f} TFLOP/s" if rec["tflops"] is not None else "emulated"), flush=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    """Run the goal measurements and write the records and the goal summary."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", type=Path, default=ROOT / "out" / "moe-goals")
    p.add_argument("--smoke", action="store_true", help="no GPU: check the plumbing at cpu-mode sizes (torch only)")
    a = p.parse_args(argv)
    gpu = wb.mode() == "gpu"
    if not gpu and not a.smoke:
        print("moe_goals: no GPU here (cpu mode). GPU figures only come from a GPU; --smoke runs the plumbing.",
              file=sys.stderr)
        return 2
    if not gpu and (a.out_dir.resolve() == (ROOT / "results").resolve()):
        print("moe_goals: --smoke never writes into results/ (emulated and CPU times are not GPU results)",
              file=sys.stderr)
        return 2
    command = "python benchmarks/moe_goals.py " + " ".join(argv if argv is not None else sys.argv[1:])
    dtype = torch.bfloat16 if gpu else torch.float32
    scale = 1 if gpu else CPU_SCALE
    names = MOE_VARIANTS if gpu else ("torch_grouped_mm", "torch_loop")
    notes: list[str] = []
    records: list[dict] = []
    goals: dict = {"dtype": str(dtype).replace("torch.", ""), "mode": wb.mode(), "goals": {}}

    # ---- prefill at the Mixtral shape: vs torch._grouped_mm and vs a dense matmul of the same FLOPs
    pshape = model_shape(PREFILL[0], PREFILL[1] if gpu else 64, scale)
    pre = {n: timed(n, pshape, dtype, command, notes) for n in names}
    records += [r for r in pre.values() if r]
    dense_shape = {"M": pshape["T"] * pshape["top_k"], "N": 3 * pshape["I"], "K": pshape["d"]}
    dense = wb.bench(wb.variant("gemm", "torch_matmul"), dtype=dtype, command=command, **dense_shape)
    records.append(dense)
    goals["prefill"] = {"shape": pshape, "dense_matmul_shape": dense_shape, "dense_matmul_ms": dense["time_ms"],
                        "dense_matmul_tflops": dense["tflops"],
                        "times_ms": {n: r["time_ms"] for n, r in pre.items() if r}}
    fused, grouped = pre.get("triton_fused"), pre.get("torch_grouped_mm")
    if fused and grouped:
        goals["goals"]["prefill_vs_grouped_mm"] = {"ratio": grouped["time_ms"] / fused["time_ms"], "goal": 1.0}
    if fused and fused["tflops"] and dense["tflops"]:
        goals["goals"]["prefill_vs_dense_matmul"] = {"ratio": fused["tflops"] / dense["tflops"], "goal": 0.7}

    # ---- decode at the DeepSeek-V3 shape: expert-weight bytes per second vs the measured copy bandwidth
    copy_gbs = copy_bandwidth_gbs(COPY_BYTES if gpu else 64 * 2**20)
    goals["copy_bandwidth_gbs"] = copy_gbs
    goals["decode"] = []
    for t in DECODE[1] if gpu else (4,):
        dshape = model_shape(DECODE[0], t, scale)
        hit = experts_hit(dshape, dtype)
        wbytes = hit * 3 * dshape["I"] * dshape["d"] * torch.empty((), dtype=dtype).element_size()
        dec = {n: timed(n, dshape, dtype, command, notes) for n in names}
        records += [r for r in dec.values() if r]
        row = {"shape": dshape, "experts_hit": hit, "weight_bytes": wbytes,
               "times_ms": {n: r["time_ms"] for n, r in dec.items() if r},
               "weight_gbs": {n: wbytes / (r["time_ms"] * 1e-3) / 1e9 for n, r in dec.items() if r}}
        goals["decode"].append(row)
        fused, loop = dec.get("triton_fused"), dec.get("torch_loop")
        if t == max(DECODE[1]) and fused:
            goals["goals"]["decode_weight_bandwidth"] = {"ratio": row["weight_gbs"]["triton_fused"] / copy_gbs,
                                                         "goal": 0.7}
            if loop:
                goals["goals"]["decode_vs_torch_loop"] = {"ratio": loop["time_ms"] / fused["time_ms"], "goal": 5.0}

    for g in goals["goals"].values():
        g["met"] = g["ratio"] >= g["goal"]
    goals["notes"] = notes
    goals["device"] = records[0]["device"] if records else None
    goals["versions"] = records[0]["versions"] if records else None
    goals["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    goals["command"] = command
    name = re.sub(r"[^a-z0-9]+", "-", (records[0]["device"]["name"] if records else "device").lower()).strip("-")
    day = dt.date.today().isoformat()
    out = save_results(records, a.out_dir / f"{name}-{day}-moe.json", command)
    gfile = a.out_dir / "goals" / f"moe-{name}-{day}.json"
    gfile.parent.mkdir(parents=True, exist_ok=True)
    gfile.write_text(json.dumps(goals, indent=1) + "\n")
    print(f"records: {out}\ngoals: {gfile}")
    for k, g in goals["goals"].items():
        print(f"{k:<26} {g['ratio']:6.2f} (goal {g['goal']})  {'met' if g['met'] else 'NOT met'}")
    if not gpu:
        print("[cpu smoke run: CPU times, not GPU figures; the fused kernel is not timed in emulation, so no goal "
              "ratio is computed]")
    for n in notes:
        print("note:", n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
