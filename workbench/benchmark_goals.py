"""Plumbing shared by the performance-goal scripts in ``benchmarks/``: ceilings, checked timings, goal files.

A goal is a ratio of two times (or throughputs) measured in the same run on the same GPU, with the number the
issue asks for. The scripts refuse to run without a GPU unless ``--smoke`` (the plumbing at cpu-mode sizes, torch
variants only, never written into ``results/``): a GPU figure only ever comes from a GPU.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

import workbench as wb
from workbench.registry import KERNELS_PACKAGE
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


def time_call(fn: Callable[[], Any]) -> tuple[float, float, float]:
    """Return (median, p20, p80) in ms of ``fn()``, timed as ``wb.bench`` times a variant: CUDA events with L2
    flushed on a GPU, the wall clock here (CPU times: never a GPU figure)."""
    from workbench.timer import _quantiles, time_cpu, time_gpu

    timer = time_gpu if wb.mode() == "gpu" else time_cpu
    return _quantiles(timer(lambda i: fn(), 1))


def copy_bandwidth_gbs(nbytes: int = COPY_BYTES) -> float:
    """Return the measured device-to-device copy bandwidth in GB/s (bytes read + bytes written per second)."""
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=wb.device())
    dst = torch.empty_like(src)
    med = time_call(lambda: dst.copy_(src))[0]
    return 2 * n * 4 / (med * 1e-3) / 1e9


@contextlib.contextmanager
def inputs_case(op: str, case: str) -> Iterator[None]:
    """Inside the block, every ``make_inputs`` of ``op`` draws the input case ``case`` of the op's ``make``.

    For a case the checker does not try (decode_attention's ``"full"``: every sequence L tokens long, a serving batch
    at one context length), which a goal is measured on: ``wb.bench`` makes its timing inputs, and checks what it
    timed against the reference, on that case. The variant's check proper must run outside the block, on the op's
    own cases (:func:`timed` with ``case=`` does both).
    """
    spec = wb.get_op(op)
    make, chosen = spec.make, case

    def forced(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
        return make(sizes, dtype, seed, device, case=chosen)

    spec.make = forced
    try:
        yield
    finally:
        spec.make = make


class Stopped(BaseException):
    """SIGTERM arrived (a time limit: ``timeout`` sends it): save what was measured, then stop.

    A BaseException, so the ``except Exception`` that keeps one failing kernel from ending a sweep lets it through.
    """


def stop_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Stopped` in the main thread, so a goal script saves before it exits."""
    def handler(signum: int, frame: Any) -> None:
        raise Stopped(f"stopped by {signal.Signals(signum).name} (a time limit?)")

    signal.signal(signal.SIGTERM, handler)


# ------------------------------------------------------------------------------------------ one autotune result
def _autotuners() -> list:
    """Return every ``triton.autotune`` object held at module level by the loaded ``kernels.*`` modules."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return []
    found: dict[int, Any] = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith(KERNELS_PACKAGE + ".") and mod is not None:
            for obj in vars(mod).values():
                if isinstance(obj, Autotuner):
                    found[id(obj)] = obj
    return list(found.values())


@contextlib.contextmanager
def launched(tuners: list) -> Iterator[list]:
    """Yield a list that fills with the autotuners launched inside the block (each once)."""
    used: list = []

    def spy(t: Any) -> Any:
        run = t.run

        def run_and_note(*args: Any, **kwargs: Any) -> Any:
            if t not in used:
                used.append(t)
            return run(*args, **kwargs)
        return run_and_note

    for t in tuners:
        t.run = spy(t)  # an instance attribute: kernel[grid](...) calls self.run
    try:
        yield used
    finally:
        for t in tuners:
            vars(t).pop("run", None)


@contextlib.contextmanager
def reuse_tuning(pins: dict) -> Iterator[None]:
    """Inside the block, an autotuner meeting a new key takes its pinned config instead of timing every config.

    ``pins`` maps autotuner -> config (what it chose at the goal shape). The kernel's own ``early_config_prune``
    still runs: when it drops the pinned config at some shape, the first config it keeps is used there. Nothing is
    timed, so a check at a handful of small shapes costs one compile per shape, not one per config. Keys first
    met inside the block are forgotten when it ends; the goal shape's tuned entry stays.
    """
    before = {t: set(t.cache) for t in pins}

    def fake_bench(cfg: Any) -> Any:
        return lambda *args, config, **meta: [0.0] * 3 if config == cfg else [1.0] * 3

    for t, cfg in pins.items():
        t._bench = fake_bench(cfg)
    try:
        yield
    finally:
        for t in pins:
            vars(t).pop("_bench", None)
            for k in set(t.cache) - before[t]:
                del t.cache[k]


@contextlib.contextmanager
def tuned_once(v: Any, shape: dict, dtype: torch.dtype) -> Iterator[None]:
    """Tune ``v``'s autotuned kernels at the goal ``shape`` (one call), then reuse that result inside the block.

    ``wb.bench`` checks a variant at the op's ragged check shapes before timing it; each is a new autotune key,
    and the fused MoE alone would compile and time ~36 configs per key before the first timing. Here the goal
    shape is tuned once and the checker's shapes run the config it chose, which is also the config timed. cpu mode
    tunes nothing (the interpreter's times mean nothing), so the block just runs.
    """
    tuners = _autotuners() if wb.mode() == "gpu" else []
    if not tuners:
        yield
        return
    spec = wb.get_op(v.op)
    _, kw = spec.split(shape)
    with launched(tuners) as used:
        v(*wb.make_inputs(v.op, dtype=dtype, seed=0, **shape), **kw)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    with reuse_tuning({t: t.best_config for t in used}):
        yield


def _bench(v: Any, shape: dict, dtype: torch.dtype, command: str, case: str | None) -> dict:
    """Check and time ``v`` at ``shape`` (``wb.bench``), its timing inputs of input case ``case`` when given."""
    if case is None:
        with tuned_once(v, shape, dtype):
            return wb.bench(v, dtype=dtype, command=command, **shape)
    with contextlib.ExitStack() as stack:
        with inputs_case(v.op, case):
            stack.enter_context(tuned_once(v, shape, dtype))  # tuned on the inputs it will be timed on
        rep = wb.check(v, dtypes=[dtype], quick=True)  # the op's own cases at its check shapes, as wb.bench checks
        if not rep.ok:
            raise AssertionError(f"bench: {v.op}/{v.name} fails the checker, so it is not timed.\n{rep.summary()}")
        with inputs_case(v.op, case):
            return wb.bench(v, dtype=dtype, command=command, check=False, **shape)


def timed(op: str, name: str, shape: dict, dtype: torch.dtype, command: str, notes: list[str],
          case: str | None = None) -> dict | None:
    """Check then time ``op/name`` at ``shape``; None (with a note) when it is missing, cannot run here or fails.

    Autotuned kernels are tuned once, at ``shape``, and the check reuses that result (:func:`tuned_once`).
    ``case`` times it on that input case of the op's ``make`` (:func:`inputs_case`); it is checked on the op's own.
    """
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
        rec = _bench(v, shape, dtype, command, case)
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
    from workbench.versions import device_info, versions

    for g in goals["goals"].values():
        g["met"] = g["ratio"] >= g["goal"]
    goals["notes"] = notes
    goals["device"] = records[0]["device"] if records else device_info()
    goals["versions"] = records[0]["versions"] if records else versions()
    goals["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    goals["command"] = command
    name = re.sub(r"[^a-z0-9]+", "-", goals["device"]["name"].lower()).strip("-")  # the same name from the start
    day = dt.date.today().isoformat()
    out = out_dir / f"{name}-{day}-{tag}.json"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:  # write then rename: a run killed mid-write leaves the previous complete file, never half of one
        save_results(records, tmp, command)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    gfile = out_dir / "goals" / f"{tag}-{name}-{day}.json"
    gfile.parent.mkdir(parents=True, exist_ok=True)
    gtmp = gfile.with_name(f".{gfile.name}.{os.getpid()}.tmp")
    gtmp.write_text(json.dumps(goals, indent=1) + "\n")
    os.replace(gtmp, gfile)
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


class GoalRun:
    """One op's goal measurements: records, goal ratios and notes, written after every measurement.

    ``time`` checks and times one variant and saves at once (quietly), so a run stopped by a time limit keeps all
    it measured; ``finish`` writes the last time and prints the summary.
    """

    def __init__(self, tag: str, out_dir: Path, command: str, goals: dict | None = None) -> None:
        self.tag, self.out_dir, self.command = tag, out_dir, command
        self.goals: dict = goals if goals is not None else {}
        self.goals.setdefault("goals", {})
        self.records: list[dict] = []
        self.notes: list[str] = []

    def time(self, op: str, name: str, shape: dict, dtype: torch.dtype, case: str | None = None) -> dict | None:
        """Check, time and save ``op/name`` at ``shape`` (on input case ``case``: :func:`timed`); return its record
        (None, with a note, if it failed)."""
        rec = timed(op, name, shape, dtype, self.command, self.notes, case)
        if rec:
            self.records.append(rec)
        self.save()
        return rec

    def save(self) -> tuple[Path, Path]:
        """Write the records and goals measured so far (quietly; the next save replaces the same two files)."""
        return write(self.goals, self.records, self.out_dir, self.tag, self.command, self.notes, quiet=True)

    def finish(self, stopped: Stopped | None = None) -> tuple[Path, Path]:
        """Write the final files and print the summary; ``stopped`` records that a time limit ended the run."""
        if stopped is not None:
            self.notes.append(f"{stopped}: the files hold what finished before it")
        return write(self.goals, self.records, self.out_dir, self.tag, self.command, self.notes)
