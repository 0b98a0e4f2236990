"""The checker for distributed ops: every case on ranks of a process group, against a float64 reference over all ranks.

``wb.check(fn_or_variant, "all_reduce")`` comes here for an op registered with ``distributed=True``. For each
(shape, dtype, seed) of the plan (world sizes 1 to 5 with lengths that do not divide by the world, from the op's
``check_shapes``) the op's ``make`` draws every rank's inputs and its ``reference`` every rank's expected output in
float64. The cases of one world size run as one job on the rank pool (:mod:`workbench.comm_pool`); each rank calls
``fn(*its_inputs, group, **kw)`` with outputs from ``wb.empty`` poisoned.

Each case runs twice, under two fault plans of the tracer (:mod:`workbench.comm_trace`), both with rendezvous sends
(a blocking send returns only once its receive is posted) and receives that land only at ``wait()``:

- ``prompt``: sends read their buffer when posted; receive buffers hold zeros until the message lands;
- ``late``: sends read their buffer when the rank next blocks; receive buffers hold NaN until the message lands.

Correct code gives the same bits under both. Outputs that differ between the plans mean the result depends on
when messages land: a buffer read before its ``wait()``, or a send buffer changed before its ``wait()``:
``missing_wait``, whatever the wrong elements look like. A job that runs past the time limit is a ``deadlock`` when
every unfinished rank waits in a communication call (the detail names each rank and its call) and ``timeout``
otherwise; the remaining world sizes are not run. Outputs are compared rank by rank: the wrong count, type, shape
or dtype on a rank is ``bad_output`` naming the rank (unless the op's ``explain`` recognises it, e.g. a
reduce-scatter returning another rank's chunk: ``wrong_chunk``); values are compared like any check (the op's
tolerance, NaN-aware, the worst element named as (rank, index)), then the op's ``explain`` and the generic patterns
name the mistake (``partial_sum``: each wrong element is the sum over only some ranks).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

from workbench import checker
from workbench.checker import CaseResult, CheckReport, _compare_outputs, _fmt
from workbench.comm_pool import CommTimeout, RankError, pool, ship, unship
from workbench.comm_trace import Faults, current
from workbench.registry import Op, OpError, Variant, as_dtype, dtype_name, poisoning

#: The fault plans every case runs under (see the module docstring).
PLANS: dict[str, Faults] = {
    "prompt": Faults(late_recvs=True, recv_fill=0.0, snapshot_sends=True, rendezvous=True),
    "late": Faults(late=True, rendezvous=True),
}
#: Seconds a case may take before its job counts as hung (``check(..., time_limit=)`` sets it).
CASE_LIMIT_S = 4.0



# ------------------------------------------------------------------------------------------------ the plan


def _target(fn: Variant | Callable) -> tuple:
    """Return how the ranks find the function to check: ("variant", op, name) or a shipped function."""
    if isinstance(fn, Variant):
        mod = getattr(fn.fn, "__module__", "")
        if mod.startswith("kernels."):
            return ("variant", fn.op, fn.name)
        return ("fn", ship(fn.fn))
    return ("fn", ship(fn))


def _resolve(target: tuple) -> Callable:
    if target[0] == "variant":
        from workbench.registry import variant

        return variant(target[1], target[2])
    return unship(target[1])


def _plan(fn: Callable, spec: Op, shapes: Sequence[dict] | None, dtypes: Iterable | None, seeds: Sequence[int],
          quick: bool, skipped: list[str]) -> list[tuple[dict, torch.dtype, int, str]]:
    plain = (torch.float32,) if torch.float32 in spec.dtypes else spec.dtypes[:1]
    dts = [as_dtype(d) for d in (dtypes if dtypes is not None else (fn.dtypes if isinstance(fn, Variant) else plain))]
    seeds = list(seeds)
    if quick:
        dts, seeds = dts[:1], seeds[:1]
    plan = []
    for shape in (shapes if shapes is not None else spec.check_shapes):
        if "world" not in shape:
            raise ValueError(f"check {spec.name}: every shape of a distributed op names its world size, got {shape}")
        for dt in dts:
            why = fn.why_not_here(dt, shape) if isinstance(fn, Variant) else None
            if why:
                if why not in skipped:
                    skipped.append(why)
                continue
            plan.extend((dict(shape), dt, s, "random") for s in seeds)
    return plan


def _drawn(spec: Op, plan: list, seed: int) -> list[tuple[dict, torch.dtype, int, str]]:
    """Return one drawn shape per world size of the plan: its other sizes redrawn in [1, 2x the largest planned]."""
    rng = np.random.default_rng(seed)
    out = []
    for world in sorted({s["world"] for s, _, _, _ in plan}):
        base = next(s for s, _, _, _ in plan if s["world"] == world)
        shape = dict(base)
        for k in spec.shape_keys:
            if k != "world" and isinstance(base.get(k), int):
                top = max(int(s[k]) for s, _, _, _ in plan if isinstance(s.get(k), int))
                shape[k] = int(rng.integers(1, 2 * max(top, 1) + 1))
        out.append((shape, plan[0][1], int(rng.integers(2**31)), "random"))
    return out


def _flag_probes(spec: Op, plan: list, rng: np.random.Generator) -> list[tuple[dict, torch.dtype, int, str]]:
    """Return, for each flag value no planned case uses (``causal=True``...), one case per world size with it."""
    out = []
    for flag, values in spec.flags.items():
        have = {s.get(flag, values[0]) for s, _, _, _ in plan}
        for value in values:
            if value in have:
                continue
            for world in sorted({s["world"] for s, _, _, _ in plan}):
                base = next(s for s, _, _, _ in plan if s["world"] == world)
                out.append(({**base, flag: value}, plan[0][1], int(rng.integers(2**31)), "random"))
    return out


# ------------------------------------------------------------------------------------------------ in the ranks


def _rank_cases(rank: int, world: int, dev: torch.device, target: tuple, cases: list[dict]) -> list[dict]:
    """Run every case of a job on this rank, under each fault plan; return the outputs (a rank of the pool)."""
    import torch.distributed as dist

    fn = _resolve(target)
    tracer = current()
    out = []
    for i, case in enumerate(cases):
        got = {}
        for plan_name, faults in PLANS.items():
            if tracer is not None:
                tracer.faults = faults
                tracer.status.context = f"case #{i} {case['label']}, plan {plan_name}"
            inputs = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in case["inputs"][rank])
            try:
                with poisoning():
                    res = fn(*inputs, None, **case["kw"])
            except Exception as e:
                raise CaseFailed(f"case #{i}: {type(e).__name__}: {e}") from e
            if tracer is not None:
                tracer.settle()
            got[plan_name] = [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t
                              for t in (res if isinstance(res, (tuple, list)) else [res])]
            dist.barrier()
        out.append(got)
    return out


class CaseFailed(RuntimeError):
    """A rank's function raised in one case (the message starts with the case's number)."""


# ------------------------------------------------------------------------------------------------ the check


def check_distributed(fn: Variant | Callable, spec: Op, name: str, *, shapes: Sequence[dict] | None = None,
                      dtypes: Iterable | None = None, seeds: Sequence[int] = (0, 1), quick: bool = False,
                      time_limit: float | None = None, seed: int | None = None, probes: bool = True,
                      raise_on_fail: bool = False, deterministic: bool = False,
                      batch_invariant: bool = False) -> CheckReport:
    """Check ``fn`` on the op's world sizes and ragged shapes (see the module docstring); return a CheckReport.

    ``deterministic=True`` instead runs the first seed of each planned case several times and compares the bits
    (one "deterministic" run in the report). ``batch_invariant=True`` does not apply: a distributed op's elements
    are spread over ranks and its reduction order is the algorithm's (OpError).
    """
    if batch_invariant:
        raise OpError(f"{spec.name}: batch_invariant=True does not apply to a distributed op (its elements are "
                      "spread over the ranks and summed in the algorithm's order); use deterministic=True")
    report = CheckReport(op=spec.name, name=name, cases=[])
    plan = _plan(fn, spec, shapes, dtypes, seeds, quick, report.skipped)
    if deterministic:
        _deterministic(spec, _target(fn), plan, time_limit, report)
        if raise_on_fail:
            report.raise_if_failed()
        return report
    if probes and plan:
        report.seed = checker._draw_seed(seed)  # the same draw of a seed as wb.check's (tests pin it there)
        rng = np.random.default_rng(report.seed + 1)
        plan_probes = [(r, "drawn") for r in _drawn(spec, plan, report.seed)] + \
                      [(r, "flag") for r in _flag_probes(spec, plan, rng)]
    else:
        plan_probes = []
    target = _target(fn)
    limit = float(time_limit) if time_limit is not None else CASE_LIMIT_S
    worlds = sorted({s["world"] for s, _, _, _ in plan + [r for r, _ in plan_probes]})
    for w_i, world in enumerate(worlds):
        runs = [(r, "") for r in plan if r[0]["world"] == world] + \
               [(r, kind) for r, kind in plan_probes if r[0]["world"] == world]
        stop = _run_world(spec, target, world, runs, limit, report)
        if stop:
            rest = worlds[w_i + 1:]
            if rest:
                report.skipped.append(f"world sizes {rest} not run after the {stop} at world {world}")
            break
    if raise_on_fail:
        report.raise_if_failed()
    return report


def _deterministic(spec: Op, target: tuple, plan: list, time_limit: float | None, report: CheckReport) -> None:
    """Run each planned case (first seed) REPEATS times per world; one "deterministic" result: same bits or not."""
    from workbench.invariance import REPEATS

    first = [r for r in plan if r[2] == plan[0][2]] if plan else []
    limit = float(time_limit) if time_limit is not None else CASE_LIMIT_S
    res = CaseResult(shape=dict(first[0][0]) if first else {}, dtype=dtype_name(first[0][1]) if first else "",
                     seed=first[0][2] if first else 0, case="random", ok=True, probe="deterministic")
    for world in sorted({s["world"] for s, _, _, _ in first}):
        runs = [r for r in first if r[0]["world"] == world]
        cases = []
        for shape, dt, seed, case in runs:
            inputs, kw = _case_inputs(spec, shape, dt, seed, case)
            cases.append({"inputs": inputs, "kw": kw, "label": f"{shape} {dtype_name(dt)}"})
        outs = [pool().run(_rank_cases, world, (target, cases), trace=False, timeout_s=limit + 0.25 * len(cases),
                           label=f"{report.op}/{report.name}")[0] for _ in range(REPEATS)]
        for i, (shape, dt, _, _) in enumerate(runs):
            calls = [[o[r][i]["prompt"] for r in range(world)] for o in outs]
            differ = next((k for k in range(1, REPEATS) if not _same_bits(calls[0], calls[k])), None)
            res.n_elements += sum(t.numel() for r in calls[0] for t in r if isinstance(t, torch.Tensor))
            if differ is not None and res.ok:
                res.ok, res.diagnosis = False, "nondeterministic_bits"
                res.shape, res.dtype = dict(shape), dtype_name(dt)
                res.detail = f"call {differ + 1} differs from call 1 at {shape} (same inputs on every rank)"
    if res.ok:
        res.detail = f"{REPEATS} calls on the same inputs, bitwise identical, at every world size of the plan"
    report.cases.append(res)


def _case_inputs(spec: Op, shape: dict, dt: torch.dtype, seed: int, case: str) -> tuple[list, dict]:
    sizes, kw = spec.split(shape)
    inputs = spec.make(sizes | kw, dt, seed, torch.device("cpu"), case=case)
    if len(inputs) != shape["world"]:
        raise ValueError(f"{spec.name}.make returned inputs for {len(inputs)} ranks, the shape says world "
                         f"{shape['world']}")
    return inputs, kw


def _run_world(spec: Op, target: tuple, world: int, runs: list, limit: float, report: CheckReport) -> str | None:
    """Run one world's cases as one pool job and judge them into ``report``; return "deadlock"/... when it hung."""
    cases, metas = [], []
    for (shape, dt, seed, case), is_probe in runs:
        inputs, kw = _case_inputs(spec, shape, dt, seed, case)
        label = ", ".join(f"{k}={v}" for k, v in shape.items()) + f" {dtype_name(dt)} seed={seed}"
        cases.append({"inputs": inputs, "kw": kw, "label": label})
        metas.append((shape, dt, seed, case, is_probe, inputs, kw))
    job_limit = limit + 0.25 * len(cases)
    try:
        outs, _, _ = pool().run(_rank_cases, world, (target, cases), trace=False, timeout_s=job_limit,
                                label=f"{report.op}/{report.name}")
    except CommTimeout as e:
        i = _case_of(str(e))
        meta = metas[i if i is not None else 0]
        stuck = all(not w.startswith(("running", "joining", "waiting for the job")) for w in e.waits.values())
        res = _result(meta, ok=False)
        res.diagnosis = "deadlock" if stuck else "timeout"
        res.detail = str(e)
        _add(report, res, meta)
        return res.diagnosis
    except RankError as e:
        i = _case_of(e.remote)
        meta = metas[i if i is not None else 0]
        res = _result(meta, ok=False)
        res.diagnosis = "error"
        res.detail = f"rank {e.rank}: " + _last_line(e.remote)
        _add(report, res, meta)
        return "error"
    by_case = [[outs[r][i] for r in range(world)] for i in range(len(cases))]
    for meta, got in zip(metas, by_case, strict=True):
        _add(report, judge(spec, meta, got), meta)
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else text


def _case_of(text: str) -> int | None:
    m = re.search(r"case #(\d+)", text)
    return int(m.group(1)) if m else None


def _result(meta: tuple, ok: bool) -> CaseResult:
    shape, dt, seed, case, is_probe, _, _ = meta
    return CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=seed, case=case, ok=ok,
                      probe=is_probe)


def _add(report: CheckReport, res: CaseResult, meta: tuple) -> None:
    (report.probes if meta[4] else report.cases).append(res)


# ------------------------------------------------------------------------------------------------ judging


def judge(spec: Op, meta: tuple, got: list[dict]) -> CaseResult:
    """Judge one case from each rank's outputs under both plans; the two plans must agree bit for bit."""
    res = {p: _judge_plan(spec, meta, [g[p] for g in got]) for p in PLANS}
    first = next((r for r in res.values() if not r.ok), None)
    if first is None:
        return res["prompt"]
    if not _same_bits([g["prompt"] for g in got], [g["late"] for g in got]):
        first.diagnosis = "missing_wait"
        first.detail = (f"the outputs differ between fault plans: prompt {'passes' if res['prompt'].ok else 'fails'}"
                        f", late {'passes' if res['late'].ok else 'fails'}")
    return first


def _same_bits(a: list[list], b: list[list]) -> bool:
    for xa, xb in zip(a, b, strict=True):
        if len(xa) != len(xb):
            return False
        for ta, tb in zip(xa, xb, strict=True):
            if isinstance(ta, torch.Tensor) != isinstance(tb, torch.Tensor):
                return False
            if not isinstance(ta, torch.Tensor):
                if ta != tb:
                    return False
                continue
            if ta.shape != tb.shape or ta.dtype != tb.dtype:
                return False
            fa, fb = ta.double(), tb.double()
            if not torch.equal(torch.isnan(fa), torch.isnan(fb)) or \
                    not torch.equal(fa.nan_to_num(0.0), fb.nan_to_num(0.0)):
                return False
    return True


def _judge_plan(spec: Op, meta: tuple, outs: list[list]) -> CaseResult:
    shape, dt, seed, case, is_probe, inputs, kw = meta
    res = _result(meta, ok=False)
    refs = [list(r) if isinstance(r, (tuple, list)) else [r] for r in spec.reference(inputs, **kw)]
    want = spec.out_dtypes(dt) if spec.out_dtypes is not None else (dt,) * len(refs[0])
    atol, rtol = spec.tolerance(dt, shape) if spec.tolerance else (1e-5, 1e-5)
    bad_rank = next((r for r, (o, ref) in enumerate(zip(outs, refs, strict=True))
                     if not _fits(o, ref, want)), None)
    if bad_rank is not None:
        key = spec.explain(outs, refs, inputs, kw, atol, rtol) if spec.explain is not None else None
        got = [(tuple(t.shape), dtype_name(t.dtype)) if isinstance(t, torch.Tensor) else type(t).__name__
               for t in outs[bad_rank]]
        res.diagnosis = key or "bad_output"
        res.detail = (f"rank {bad_rank} returned {got}, expected "
                      f"{[(tuple(t.shape), dtype_name(d)) for t, d in zip(refs[bad_rank], want, strict=True)]}")
        if key:  # the values say what went wrong: name the rank's first element like a mismatch
            res.detail = f"{key}: " + res.detail
            o = outs[bad_rank][0]
            res.n_elements = sum(r[0].numel() for r in refs)
            res.n_mismatch = max(1, refs[bad_rank][0].numel())
            res.first_indices = [(bad_rank, 0)]
            res.worst = {"index": (bad_rank, 0), "got": _fmt(float(o.reshape(-1)[0])) if o.numel() else "[]",
                         "expected": _fmt(float(refs[bad_rank][0].reshape(-1)[0])) if refs[bad_rank][0].numel()
                         else "[]", "abs_err": float("inf"), "tol": atol}
        return res
    flat_o = [torch.cat([o[j].reshape(-1) for o in outs]) for j in range(len(refs[0]))]
    flat_r = [torch.cat([r[j].reshape(-1).double() for r in refs]) for j in range(len(refs[0]))]
    _compare_outputs(res, spec, shape, dt, flat_o, flat_r, None)
    if res.ok:
        return res
    _rank_index(res, [o[0].numel() for o in outs])
    if spec.explain is not None:
        key = spec.explain(outs, refs, inputs, kw, atol, rtol)
        if key is not None:
            res.diagnosis = key
    return res


def _fits(outs: list, refs: list, want: Sequence[torch.dtype]) -> bool:
    return len(outs) == len(refs) and all(
        isinstance(o, torch.Tensor) and type(o) is torch.Tensor and o.shape == r.shape and o.dtype == w
        for o, r, w in zip(outs, refs, want, strict=True))


def _rank_index(res: CaseResult, sizes: list[int]) -> None:
    """Rewrite the flat indices of the first output as (rank, index) pairs."""
    starts = list(itertools.accumulate([0] + sizes))

    def where(flat: int) -> tuple[int, int]:
        r = max(i for i in range(len(sizes)) if starts[i] <= flat)
        return (r, flat - starts[r])

    if res.worst is not None and len(res.worst.get("index", ())) == 1 and "output" not in res.worst:
        res.worst["index"] = where(res.worst["index"][0])
        res.first_indices = [where(i[0]) for i in res.first_indices if len(i) == 1]


# ------------------------------------------------------------------------------------------------ explain helpers


def partial_sums(outs: list[list], refs: list[list], xs: list[torch.Tensor], atol: float,
                 rtol: float) -> str | None:
    """Return 'partial_sum' when every wrong element of every rank's all-reduce output is a proper subset's sum.

    ``xs`` are the ranks' inputs (same length as each output). Subsets are enumerated (at most 2^5 for 5 ranks).
    """
    world = len(xs)
    if world < 2 or not xs[0].numel():
        return None
    x = torch.stack([t.double() for t in xs])  # [world, N]
    subsets = [m for m in range(1, 2**world - 1)]
    sums = torch.stack([x[[r for r in range(world) if m >> r & 1]].sum(0) for m in subsets])  # [S, N]
    any_wrong = False
    for o, ref in zip(outs, refs, strict=True):
        got, want = o[0].double().reshape(-1), ref[0].double().reshape(-1)
        if got.shape != want.shape:
            return None
        tol = atol + rtol * want.abs()
        bad = ~((got - want).abs() <= tol)
        if not bad.any():
            continue
        any_wrong = True
        hit = ((sums[:, bad] - got[bad]).abs() <= tol[bad]).any(0)
        if not bool(hit.all()):
            return None
    return "partial_sum" if any_wrong else None


def other_chunk(outs: list[list], refs: list[list], full: torch.Tensor, bounds: list[tuple[int, int]], atol: float,
                rtol: float) -> str | None:
    """Return 'wrong_chunk' when some rank's output is another rank's chunk of ``full`` (and no rank's is junk)."""
    found = False
    for r, o in enumerate(outs):
        got = o[0].double().reshape(-1) if isinstance(o[0], torch.Tensor) else None
        if got is None:
            return None
        want = refs[r][0].double().reshape(-1)
        if got.shape == want.shape and bool(((got - want).abs() <= atol + rtol * want.abs()).all()):
            continue
        match = [c for c, (a, b) in enumerate(bounds) if c != r and b - a == got.numel()
                 and bool(((got - full[a:b]).abs() <= atol + rtol * full[a:b].abs()).all())]
        if not match:
            return None
        found = True
    return "wrong_chunk" if found else None


__all__ = ["CASE_LIMIT_S", "PLANS", "check_distributed", "judge", "other_chunk", "partial_sums", "_fmt"]
