"""Check every correct registered variant at the probe shapes ``wb.check`` would draw for many seeds.

    python scripts/sweep-drawn.py                          # seeds 0..19, every op
    python scripts/sweep-drawn.py --ops gemm,softmax --seeds 50 --start 1000
    python scripts/sweep-drawn.py --variant gemm_fp8_block/triton_block --start 327883 --seeds 1
    python scripts/sweep-drawn.py --list                   # print the drawn cases, run nothing

Besides its planned runs, ``wb.check`` runs probes, among them one shape per call drawn near the op's cheap
planned shapes from a fresh random seed (``check(..., seed=...)`` replays a draw). The test suite pins that seed
per variant (``tests/_ops.py`` ``check_runs``) so that a CI run is reproducible; this script explores many draws
instead, to find the variants a drawn shape breaks before CI happens to draw it.

It does only the drawn probes, as cheaply as it can: for each variant that runs here (as tests/test_ops.py skips
the others) and each run of ``check_runs`` (its shapes, dtypes, seeds, cases), it builds the check's plan as
``wb.check`` does, draws the shapes with ``workbench.checker._draw_shapes`` and the input seed exactly as
``_run_probes`` does for seeds ``--start`` .. ``--start + --seeds - 1``, removes repeated (shape, dtype, input
seed) cases, and checks each one alone: ``wb.check(v, shapes=[shape], dtypes=[dt], seeds=(input_seed,),
cases=("random",), probes=False)``. The planned runs are not repeated (the suite covers them). One line per
failure (op/variant, shape, dtype, the draw seeds that drew it, the report's summary), a tally; exit 1 on any
failure. It runs in one process; ``OMP_NUM_THREADS=1 WORKBENCH_CPU_THREADS=1`` keep it to about one core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("WORKBENCH_MODE", "cpu")  # as tests/conftest.py: the mode is decided before workbench loads
os.environ.setdefault("WORKBENCH_PROGRESS", "0")

import torch  # noqa: E402

import workbench as wb  # noqa: E402  (before numba/triton: it sets the emulators up for the mode)
from tests._ops import check_runs, cuda_engine_ready  # noqa: E402
from workbench import checker  # noqa: E402
from workbench.registry import dtype_name  # noqa: E402

Case = tuple[tuple[tuple[str, object], ...], torch.dtype, int]  # (shape items, dtype, input seed)


def why_skipped(v: wb.Variant) -> str | None:
    """Return why tests/test_ops.py skips the correct variant ``v`` here, or None when it runs it."""
    if not v.runs_here():
        return v.why_not_here()
    if v.backend == "cuda":
        why = cuda_engine_ready()
        return f"CUDA C engine not ready: {why}" if why else None
    return None


DRAW_KEYS = ("dtypes", "shapes", "cases", "seeds", "quick", "runs_like")  # the check keywords the draw depends on


def drawn_cases(v: wb.Variant, kw: dict, draw_seeds: Sequence[int]) -> dict[Case, list[int]]:
    """Return the drawn probe cases of ``wb.check(v, **kw, seed=s)`` for each ``s``, each with the seeds drawing it."""
    found: dict[Case, list[int]] = {}
    for s in draw_seeds:
        for shape, dt, input_seed in checker.drawn_probes(v, s, **{k: kw[k] for k in DRAW_KEYS if k in kw}):
            found.setdefault((tuple(shape.items()), dt, input_seed), []).append(s)
    return found


def variant_cases(v: wb.Variant, draw_seeds: Sequence[int]) -> dict[Case, list[int]]:
    """Return the drawn cases of every run of ``check_runs(v)``, merged (a case drawn twice runs once)."""
    found: dict[Case, list[int]] = {}
    for kw in check_runs(v.op, v):
        for case, seeds in drawn_cases(v, kw, draw_seeds).items():
            have = found.setdefault(case, [])
            have += [s for s in seeds if s not in have]
    return found


def fmt_shape(shape: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def run_case(v: wb.Variant, case: Case) -> checker.CheckReport:
    """Check ``v`` at one drawn case, as the probe runs it (case "random", the variant's own time limit)."""
    items, dt, input_seed = case
    return wb.check(v, shapes=[dict(items)], dtypes=[dt], seeds=(input_seed,), cases=("random",), probes=False,
                    progress=False)


def select(ops: str | None, variant: str | None) -> list[wb.Variant]:
    """Return the correct variants asked for: every op's (or ``--ops``'s), or the one ``--variant`` names."""
    if variant:
        op, _, name = variant.partition("/")
        return [wb.variant(op, name)]
    names = [o.strip() for o in ops.split(",") if o.strip()] if ops else list(wb.ops())
    unknown = sorted(set(names) - set(wb.ops()))
    if unknown:
        raise SystemExit(f"sweep-drawn: unknown ops {unknown} (ops: {', '.join(wb.ops())})")
    return [v for op in names for v in wb.variants(op)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated ops (default: every op)")
    p.add_argument("--variant", help="one variant, op/name (overrides --ops)")
    p.add_argument("--seeds", type=int, default=20, help="how many draw seeds (default 20)")
    p.add_argument("--start", type=int, default=0, help="the first draw seed (default 0)")
    p.add_argument("--list", action="store_true", help="print the drawn cases, run nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case run, not only failures")
    return p.parse_args(argv)


def sweep_variant(v: wb.Variant, draw_seeds: Sequence[int], args: argparse.Namespace, tally: dict) -> None:
    """Run (or list) the drawn cases of one variant; print a line per failure and one for the variant."""
    t0 = time.monotonic()
    cases = variant_cases(v, draw_seeds)
    n_fail = n_skip = 0
    for case in cases:
        items, dt, input_seed = case
        where = f"{v.op}/{v.name}  {fmt_shape(dict(items))}  {dtype_name(dt)}  input seed={input_seed}"
        draws = f"draw seed{'s' if len(cases[case]) > 1 else ''}={','.join(map(str, cases[case]))}"
        if args.list:
            print(f"CASE  {where}  {draws}", flush=True)
            continue
        rep = run_case(v, case)
        if not rep.cases:
            n_skip += 1
            print(f"SKIP  {where}  {draws}: {'; '.join(rep.skipped) or 'nothing ran'}", flush=True)
        elif not rep.ok:
            n_fail += 1
            print(f"FAIL  {where}  {draws}\n" + "\n".join("    " + ln for ln in rep.summary().splitlines()), flush=True)
        elif args.verbose:
            print(f"ok    {where}  {draws}  max|err|={rep.cases[0].max_abs_err:.2e}", flush=True)
    tally["cases"] += len(cases)
    tally["failed"] += n_fail
    tally["skipped_cases"] += n_skip
    tally["variants"] += 1
    if n_fail:
        tally["failing_variants"].append(f"{v.op}/{v.name}")
    if not args.list:
        print(f"# {v.op}/{v.name}: {len(cases)} drawn cases, {n_fail} failed"
              + (f", {n_skip} refused while running" if n_skip else "") + f"  ({time.monotonic() - t0:.1f} s)",
              flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Sweep the drawn probes; return 1 if any failed."""
    args = parse_args(argv)
    if args.seeds < 1 or args.start < 0:
        raise SystemExit("sweep-drawn: --seeds must be >= 1 and --start >= 0")
    draw_seeds = range(args.start, args.start + args.seeds)
    tally: dict = {"variants": 0, "cases": 0, "failed": 0, "skipped_cases": 0, "failing_variants": [],
                   "skipped": []}
    t0 = time.monotonic()
    for v in select(args.ops, args.variant):
        why = why_skipped(v)
        if why:
            tally["skipped"].append(f"{v.op}/{v.name}")
            print(f"# {v.op}/{v.name}: skipped: {why.splitlines()[0]}", flush=True)
            continue
        sweep_variant(v, draw_seeds, args, tally)
    print(f"\n{tally['variants']} variants, {tally['cases']} drawn cases (draw seeds {args.start}.."
          f"{args.start + args.seeds - 1}), {tally['failed']} failed, {tally['skipped_cases']} refused while running, "
          f"{len(tally['skipped'])} variants skipped here; {time.monotonic() - t0:.0f} s")
    if tally["failing_variants"]:
        print("failing: " + ", ".join(tally["failing_variants"]))
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
