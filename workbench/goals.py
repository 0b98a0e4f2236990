"""Plumbing shared by the performance-goal scripts in ``benchmarks/``: ceilings, checked timings, goal files.

A goal is a ratio of two times (or throughputs) measured in the same run on the same GPU, with the number the
issue asks for. The scripts refuse to run without a GPU unless ``--smoke`` (the plumbing at cpu-mode sizes, torch
variants only, never written into ``results/``): a GPU figure only ever comes from a GPU.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
from pathlib import Path

import torch

import workbench as wb
from workbench.results import save_results

ROOT = Path(__file__).resolve().parents[1]
COPY_BYTES = 4 * 2**30  # 4 GiB: far beyond the 50-60 MB L2 of an H100/H200, so the copy streams from HBM


def refuse_without_gpu(script: str, smoke: bool, out_dir: Path) -> int | None:
    """Return an exit code (2) with a message when the script must not run here, else None."""
    if wb.mode() != "gpu" and not smoke:
        print(f"{script}: no GPU here (cpu mode). GPU figures only come from a GPU; --smoke runs the plumbing.",
              file=sys.stderr)
        return 2
    if wb.mode() != "gpu" and out_dir.resolve() == (ROOT / "results").resolve():
        print(f"{script}: --smoke never writes into results/ (emulated and CPU times are not GPU results)",
              file=sys.stderr)
        return 2
    return None


def copy_bandwidth_gbs(nbytes: int = COPY_BYTES) -> float:
    """Return the measured device-to-device copy bandwidth in GB/s (bytes read + bytes written per second)."""
    from workbench.timer import _quantiles, time_cpu, time_gpu

    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=wb.device())
    dst = torch.empty_like(src)
    timer = time_gpu if wb.mode() == "gpu" else time_cpu
    med = _quantiles(timer(lambda i: dst.copy_(src), 1))[0]
    return 2 * n * 4 / (med * 1e-3) / 1e9


def timed(op: str, name: str, shape: dict, dtype: torch.dtype, command: str, notes: list[str]) -> dict | None:
    """Check then time ``op/name`` at ``shape``; None (with a note) when it is missing, cannot run here or fails."""
    try:
        v = wb.variant(op, name)
    except KeyError as e:
        notes.append(f"{op}/{name}: not registered ({e})")
        return None
    why = v.why_not_here(dtype, shape)
    if why:
        notes.append(f"{op}/{name} at {shape}: {why}")
        return None
    try:
        rec = wb.bench(v, dtype=dtype, command=command, **shape)
    except Exception as e:  # a failed check or launch is a result too: say it, keep measuring the rest
        notes.append(f"{op}/{name} at {shape}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return None
    size = " ".join(f"{k}={v}" for k, v in shape.items())
    rate = (f"{rec['tflops']:7.1f} TFLOP/s" if rec.get("tflops") else "") + (
        f" {rec['gbps']:7.0f} GB/s" if rec.get("gbps") else "")
    print(f"{op}/{name:<22} {size:<40} {rec['time_ms']:9.3f} ms {rate if not rec['emulated'] else 'emulated'}",
          flush=True)
    return rec


def geomean(xs: list[float]) -> float:
    """Return the geometric mean of positive numbers."""
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def write(goals: dict, records: list[dict], out_dir: Path, tag: str, command: str, notes: list[str], *,
          quiet: bool = False) -> tuple[Path, Path]:
    """Write ``<gpu>-<date>-<tag>.json`` (records) and ``goals/<tag>-<gpu>-<date>.json``; print the summary.

    ``quiet`` writes without the summary: a script saves what it has measured so far this way after each section,
    so a run stopped by a time limit keeps it (the next write replaces the same two files).
    """
    for g in goals["goals"].values():
        g["met"] = g["ratio"] >= g["goal"]
    goals["notes"] = notes
    goals["device"] = records[0]["device"] if records else None
    goals["versions"] = records[0]["versions"] if records else None
    goals["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    goals["command"] = command
    name = re.sub(r"[^a-z0-9]+", "-", (records[0]["device"]["name"] if records else "device").lower()).strip("-")
    day = dt.date.today().isoformat()
    out = save_results(records, out_dir / f"{name}-{day}-{tag}.json", command)
    gfile = out_dir / "goals" / f"{tag}-{name}-{day}.json"
    gfile.parent.mkdir(parents=True, exist_ok=True)
    gfile.write_text(json.dumps(goals, indent=1) + "\n")
    if quiet:
        return out, gfile
    print(f"records: {out}\ngoals: {gfile}")
    for k, g in goals["goals"].items():
        print(f"{k:<34} {g['ratio']:6.2f} (goal {g['goal']})  {'met' if g['met'] else 'NOT met'}")
    if wb.mode() != "gpu":
        print("[cpu smoke run: CPU times, not GPU figures; kernels are not timed in emulation, so no goal ratio is "
              "computed]")
    for n in notes:
        print("note:", n)
    return out, gfile
