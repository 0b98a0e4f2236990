"""Determinism and batch invariance: does a kernel give the same bits on the same row every time?

``wb.check(fn, op, deterministic=True)`` calls ``fn`` several times on the same inputs (5 in cpu mode, 20 on a GPU)
and requires bitwise-identical outputs (``torch.equal``, where NaN equals NaN at the same place). A failure is
``nondeterministic_bits``: the report names the first differing element, its two values, how many elements differ
and the largest difference (the spread). Atomics (a float ``atomicAdd`` summing in arrival order), lock-ordered
reductions and tuners that time configs are the usual causes.

``wb.check(fn, op, batch_invariant=True)`` makes one batch of 64 rows with the op's ``make``, runs it whole, then
runs slices of it (contiguous copies) of 7 rows and of 1 row (the first, middle and last ones), and requires each
row's output to be bitwise the same whichever batch computed it. A failure is ``batch_variant``: the report names
the first row that differs, the element, its value in each batch and the batch sizes compared. Split-K GEMM,
split-KV decode whose split count follows the batch and atomic reductions are the classic offenders (Thinking
Machines, "Defeating Nondeterminism in LLM Inference", 2025). In cpu mode an emulated kernel (anything but a torch
one) gets batches of 8, 3 and 1: the Triton interpreter takes about 2 s for one batch of 16 short decode rows. The
report says which sizes ran.

The batch axis comes from the op's signature: the first dimension of its (first) output that an input has too
(``gemm(a[M,K], b[K,N]) -> [M,N]``: M, rows of a; ``decode_attention``: B, rows of q, block_table and seq_lens,
never the shared KV cache). An output named ``dX`` after an input ``X`` (attention_bwd's ``dq``) has X's dims. Every
input with that dimension is sliced along it, the rest are passed whole; outputs without it (a sum over the batch)
are not compared, and an op whose outputs have none (moe_align's expert-sorted slots) raises :class:`OpError`.

Both modes also compare the first call's output with the float64 reference, as :func:`workbench.check` does, so a
wrong kernel is not reported as a deterministic one. In cpu mode the emulators run a launch's blocks one after
another in a fixed order (only the Numba simulator runs a block's threads as OS threads), so the order atomics
arrive in hardly varies there: ``deterministic=True`` shows state kept between calls rather than atomics, and the
split counts the kernels pick in cpu mode are fixed ones. A variant registered ``deterministic=False``
(atomics, a lock) gets a note saying so, and :func:`invariance_table` (both modes over the variants of some ops, one
row per variant) shows it as "no (declared)" even when the emulation gave the same bits.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

import workbench.checker as ck
from workbench._mode import MODE
from workbench.registry import Op, OpError, UnsupportedHere, Variant, as_dtype, dtype_name, get_op, make_inputs

#: Calls on the same inputs in deterministic mode.
REPEATS = 20 if MODE == "gpu" else 5
#: Batch sizes compared in batch-invariant mode: the whole batch is the largest.
BATCH_SIZES = (64, 7, 1)
#: The same in cpu mode for an emulated (not torch) kernel.
CPU_BATCH_SIZES = (8, 3, 1)


# --------------------------------------------------------------------------------------------- the batch axis
@dataclass(frozen=True)
class BatchAxes:
    """Where an op's batch dimension is: its name (a shape key), the axis of each input and output that has it."""

    dim: str
    inputs: tuple[int | None, ...]  # per positional input: the axis to slice, or None (passed whole)
    outputs: tuple[int | None, ...]  # per output: the axis holding the rows, or None (not compared)
    output_names: tuple[str, ...]


def _dims(arg: str) -> list[str] | None:
    """Return the dimension names of ``"q[B,Hq,D]"`` (None for an argument without a shape)."""
    m = re.search(r"\[([^\]]*)\]", arg)
    return [d.strip() for d in m.group(1).split(",")] if m else None


def batch_axes(op: str | Op) -> BatchAxes:
    """Return the batch axes of ``op`` from its signature; raise :class:`OpError` naming the op when it has none."""
    from workbench.checker import _signature_args

    spec = get_op(op)
    args, _, result = spec.signature.partition("->")
    in_args = [a for a in _signature_args(args) if "=" not in a]
    names = [re.split(r"[\[=]", a, maxsplit=1)[0].strip() for a in in_args]
    in_dims = [_dims(a) for a in in_args]
    result = result.strip()
    outs = _signature_args(f"f{result}") if result.startswith("(") else [result]
    out_names = list(spec.outputs) or ["out"]
    out_dims = []
    for i, o in enumerate(outs[:len(out_names)]):
        dims = _dims(o)
        base = re.split(r"\[", o, maxsplit=1)[0].strip()
        if dims is None and base.startswith("d") and base[1:] in names:  # a gradient: dq has q's dims
            dims = in_dims[names.index(base[1:])]
        out_dims.append(dims)
        if i < len(out_names) and base and not base.startswith("["):
            out_names[i] = base
    have = {d for dims in in_dims if dims for d in dims}
    dim = next((d for dims in out_dims if dims for d in dims if d in have and d in spec.shape_keys), None)
    if dim is None:
        raise OpError(f"{spec.name} has no batch axis: none of its outputs ({result}) has a dimension of its inputs "
                      f"that is one of its sizes {list(spec.shape_keys)}, so a row of the output is no row of a "
                      "batch; batch_invariant=True does not apply")
    return BatchAxes(dim, tuple(d.index(dim) if d and dim in d else None for d in in_dims),
                     tuple(d.index(dim) if d and dim in d else None for d in out_dims), tuple(out_names))


# ----------------------------------------------------------------------------------------------------- the report
@dataclass(repr=False)
class InvarianceReport(ck.CheckReport):
    """What ``check(..., deterministic=True)`` / ``batch_invariant=True`` found: a :class:`CheckReport` whose runs
    are one per mode and shape (``probe`` "deterministic" or "batch"); ``notes`` say what ran differently here."""

    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Return a few lines: verdict, diagnosis, each run, what was left out."""
        if not self.cases:
            return f"{self.op}/{self.name}: nothing was checked ({'; '.join(self.skipped) or 'no runnable case'})"
        kinds = sorted({c.probe for c in self.cases}, reverse=True)
        what = " and ".join({"deterministic": "deterministic", "batch": "batch-invariant"}[k] for k in kinds)
        if self.ok:
            head = (f"PASS {self.op}/{self.name}: {what} (bitwise) in {len(self.cases)} runs, each matching the "
                    "float64 reference")
        else:
            d = self.diagnosis
            head = (f"FAIL {self.op}/{self.name}: {len(self.failures)} of {len(self.cases)} {what} runs fail.\n"
                    f"  diagnosis: {d}: {ck.DIAGNOSES.get(d, '')}")
        lines = [head]
        for c in self.cases:
            lines.append("  " + c.line() + (f"  {c.detail}" if c.ok and c.detail else ""))
        lines += [f"  note: {n}" for n in self.notes]
        if self.skipped:
            lines.append("  skipped: " + "; ".join(self.skipped[:4]) + (" ..." if len(self.skipped) > 4 else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        lines = self.summary().splitlines()
        body = "".join(f"<div style='font-family:monospace;white-space:pre-wrap'>{html.escape(ln)}</div>"
                       for ln in lines[1:])
        return f"<div><b style='color:{colour}'>{html.escape(lines[0])}</b>{body}</div>"


# ------------------------------------------------------------------------------------------------------ running
def _refs(spec: Op, inputs: tuple, kw: dict) -> list[torch.Tensor]:
    ref = spec.reference(*inputs, **kw)
    return list(ref) if isinstance(ref, (tuple, list)) else [ref]


def _run(fn: Callable, spec: Op, inputs: tuple, kw: dict, res: ck.CaseResult, limit: float | None,
         refs: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """Call ``fn`` as the checker does (poisoned outputs, sanitizers, time limit, tamper and mutation checks);
    return its outputs as a list (``refs``: the reference's, for their shapes), or None after filling ``res``."""
    from workbench._sanitize import sanitizing
    from workbench.registry import poisoning

    before = [ck._bits(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    trusted = ck._trusted()
    try:
        with ck._time_limit(limit), poisoning(), sanitizing(), ck._quiet_floating_point():
            out = fn(*inputs, **kw)
    except (OpError, UnsupportedHere, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001  (as the checker: the kernel failed, report it)
        ck._failed_call(res, e, limit)
        return None
    finally:
        tampered = ck._restore_checker(trusted)
    if tampered:
        res.diagnosis, res.detail = "tampered", f"the call replaced {', '.join(sorted(set(tampered))[:5])}"
        return None
    mutated = ck._mutated(spec, inputs, before)
    if mutated:
        res.diagnosis, res.detail = "mutated_input", mutated
        return None
    dt = as_dtype(res.dtype)
    outs = ck._outputs(res, spec, out, refs, inputs, dt)
    if outs is None:
        return None
    if spec.canonical is not None:  # an order the contract leaves free (atomic slots) is put in canonical form
        outs = list(spec.canonical(outs, refs, *inputs, **kw))
    return [o.detach().clone() for o in outs]


def _judge(fn: Callable, spec: Op, inputs: tuple, kw: dict, outs: list[torch.Tensor], res: ck.CaseResult,
           shape: dict, refs: list[torch.Tensor]) -> bool:
    """Compare the first call's outputs with the float64 reference ``refs`` into ``res``; True when right."""
    dt = as_dtype(res.dtype)
    touts = None
    baseline = ck._torch_baseline(spec.name)
    if dt in (torch.float16, torch.bfloat16) and baseline is not None and fn is not baseline:
        t = baseline.fn(*inputs, **kw)
        touts = list(t) if isinstance(t, (tuple, list)) else [t]
    ck._compare_outputs(res, spec, shape, dt, outs, refs, touts)
    if not res.ok:
        res.diagnosis = ck._recomputed_diagnosis(spec, res, outs, refs, inputs, shape, dt) or res.diagnosis
        res.detail = "the first call is wrong: " + res.line().split("  ", 3)[-1]
    return res.ok


def differ(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return the bool mask of elements where ``a`` and ``b`` differ as ``torch.equal`` sees them, NaN equal to NaN."""
    if a.is_floating_point() or a.is_complex():
        return (a != b) & ~(torch.isnan(a) & torch.isnan(b))
    return a != b


def _value(t: torch.Tensor, idx: tuple[int, ...]) -> str:
    v = t[idx].item()
    return f"{v:.9g}" if isinstance(v, float) else str(v)


def _spread(a: torch.Tensor, b: torch.Tensor, bad: torch.Tensor) -> float:
    """Return the largest |a - b| over the differing elements (inf where one of them is NaN or Inf)."""
    if not bad.any():
        return 0.0
    d = (a[bad].double() - b[bad].double()).abs().nan_to_num(nan=math.inf)
    return float(d.max())


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _where(names: Sequence[str], k: int, idx: tuple[int, ...]) -> str:
    return (f"{names[k]}" if len(names) > 1 else "out") + str(list(idx))


def _determinism(run: _Check, shape: dict, dt: torch.dtype, seed: int) -> ck.CaseResult:
    """Run one shape ``REPEATS`` times on the same inputs; return its CaseResult."""
    spec = run.spec
    res = ck.CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=seed, case="random", ok=False,
                        probe="deterministic")
    _, kw = spec.split(shape)
    inputs = make_inputs(spec.name, dtype=dt, seed=seed, **shape)
    refs = _refs(spec, inputs, kw)
    first = _run(run.fn, spec, inputs, kw, res, run.limit, refs)
    if first is None or not _judge(run.fn, spec, inputs, kw, first, res, shape, refs):
        return res
    names = spec.outputs or ("out",)
    bad_union = [torch.zeros(o.shape, dtype=torch.bool) for o in first]
    spread, differing_calls, found = 0.0, 0, None
    for j in range(1, run.repeats):
        again = _run(run.fn, spec, inputs, kw, res, run.limit, refs)
        if again is None:
            res.ok = False
            res.detail = f"call {j + 1} of {run.repeats} on the same inputs failed: {res.detail}"
            return res
        hit = False
        for k, (a, b) in enumerate(zip(first, again, strict=True)):
            bad = differ(a.cpu(), b.cpu())
            if bad.any():
                hit = True
                bad_union[k] |= bad
                spread = max(spread, _spread(a.cpu(), b.cpu(), bad))
                if found is None:
                    idx = ck._unravel(int(bad.reshape(-1).nonzero()[0]), a.shape)
                    found = (j, k, idx, _value(a.cpu(), idx), _value(b.cpu(), idx))
        differing_calls += hit
    n_diff = sum(int(m.sum()) for m in bad_union)
    n_all = sum(m.numel() for m in bad_union)
    if found is None:
        res.detail = f"{run.repeats} calls on the same inputs, bitwise identical"
        return res
    j, k, idx, a, b = found
    res.ok, res.diagnosis, res.n_mismatch = False, "nondeterministic_bits", n_diff
    res.first_indices = [idx]
    res.detail = (f"call {j + 1} differs from call 1 at {_where(names, k, idx)}: {a} then {b}; "
                  f"{differing_calls} of {run.repeats - 1} repeats differ, {n_diff}/{n_all} elements differ over "
                  f"the {run.repeats} calls, max |difference| {spread:.3g}")
    return res


def _slice(inputs: tuple, axes: BatchAxes, start: int, n: int) -> tuple:
    """Return the inputs of rows [start, start + n): each batched input sliced along its axis (a contiguous copy)."""
    out = []
    for t, ax in zip(inputs, axes.inputs + (None,) * (len(inputs) - len(axes.inputs)), strict=True):
        if ax is not None and isinstance(t, torch.Tensor):
            t = t.narrow(ax, start, n).clone(memory_format=torch.contiguous_format)
        out.append(t)
    return tuple(out)


def _starts(total: int, n: int) -> list[int]:
    """Return where the slices of ``n`` rows start: the first rows, the middle ones and the last ones."""
    return sorted({0, max(0, (total - n) // 2), total - n})


def _batch(run: _Check, base: dict, sizes: tuple[int, ...], dt: torch.dtype, seed: int) -> ck.CaseResult:
    """Run one base shape as a batch of ``sizes[0]`` rows and as slices of the smaller sizes; return its CaseResult."""
    spec, axes = run.spec, run.axes
    total = sizes[0]
    shape = {**base, axes.dim: total}
    res = ck.CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=seed, case="random", ok=False, probe="batch")
    _, kw = spec.split(shape)
    inputs = make_inputs(spec.name, dtype=dt, seed=seed, **shape)
    refs = _refs(spec, inputs, kw)
    whole = _run(run.fn, spec, inputs, kw, res, run.limit, refs)
    if whole is None or not _judge(run.fn, spec, inputs, kw, whole, res, shape, refs):
        return res
    names = axes.output_names
    said = ", ".join(str(s) for s in sizes)
    rows = 0
    for n in sizes[1:]:
        for start in _starts(total, n):
            part = _slice(inputs, axes, start, n)
            shapes_of = [r.narrow(ax, start, n) if ax is not None else r  # the reference's shapes for n rows
                         for r, ax in zip(refs, axes.outputs + (None,) * len(refs), strict=False)]
            got = _run(run.fn, spec, part, kw, res, run.limit, shapes_of)
            if got is None:
                res.ok = False
                res.detail = f"the batch of {n} (rows {start}..{start + n - 1}) failed: {res.detail}"
                return res
            rows += n
            for k, (a, b) in enumerate(zip(whole, got, strict=True)):
                ax = axes.outputs[k] if k < len(axes.outputs) else None
                if ax is None:
                    continue
                a = a.narrow(ax, start, n).cpu()
                b = b.cpu()
                bad = differ(a, b)
                if not bad.any():
                    continue
                idx = ck._unravel(int(bad.reshape(-1).nonzero()[0]), a.shape)
                full = tuple(i + start if d == ax else i for d, i in enumerate(idx))
                row = full[ax]
                res.ok, res.diagnosis, res.n_mismatch = False, "batch_variant", int(bad.sum())
                res.first_indices = [full]
                bad_rows = int(bad.movedim(ax, 0).reshape(n, -1).any(dim=1).sum())
                res.detail = (f"row {row} differs: {_where(names, k, full)} is {_value(a, idx)} in the batch of "
                              f"{total} but {_value(b, idx)} in a batch of {n} (rows {start}..{start + n - 1}); "
                              f"{_count(int(bad.sum()), 'element')} in {bad_rows} of its {n} rows differ, max "
                              f"|difference| {_spread(a, b, bad):.3g}; batch sizes compared: {said}")
                return res
    skipped = [nm for nm, ax in zip(names, axes.outputs, strict=False) if ax is None]
    res.detail = (f"rows bitwise identical in batches of {said} ({rows} rows recomputed in the smaller batches)"
                  + (f"; {', '.join(skipped)} not compared (no {axes.dim} axis)" if skipped else ""))
    return res


@dataclass
class _Check:
    fn: Callable
    spec: Op
    limit: float | None
    repeats: int = REPEATS
    axes: BatchAxes | None = None


def _roomy_cost(spec: Op, shape: dict, skip: str | None = None) -> int:
    n = 1
    for k in spec.shape_keys:
        if k != skip:
            n *= max(1, int(shape.get(k, 1)))
    return n


def _runs_here(fn: Callable, dt: torch.dtype, shape: dict) -> str | None:
    return fn.why_not_here(dt, shape) if isinstance(fn, Variant) else None


def _default_shapes(spec: Op, fn: Callable, dt: torch.dtype, skip: str | None) -> list[dict]:
    """Return the shapes a mode runs by default, among those ``fn`` runs here: on a GPU every check shape and the
    op's mid-sized cpu bench shape (a split count or an atomic's contention shows at more than a few rows); in cpu
    mode the first check shape of the second lowest cost, counted without the batch size (``skip``): the cheapest
    is the degenerate one (1 x 1, one token), the costlier ones take seconds per batch in the emulators."""
    extra = spec.bench_shapes.get("cpu", [])[:1] if MODE == "gpu" else []
    shapes = [s for s in [*spec.check_shapes, *extra]
              if _runs_here(fn, dt, {**s, **({skip: 1} if skip else {})}) is None]
    if not shapes or MODE == "gpu":
        return shapes
    costs = sorted({_roomy_cost(spec, s, skip) for s in shapes})
    want = costs[min(1, len(costs) - 1)]
    return [next(s for s in shapes if _roomy_cost(spec, s, skip) == want)]


def _batch_sizes(fn: Callable, dt: torch.dtype, base: dict, dim: str, notes: list[str]) -> tuple[int, ...] | None:
    """Return the batch sizes for ``fn`` (the whole batch first): smaller in cpu mode for an emulated kernel, and
    where the variant refuses the larger whole batch here; None when not even the smallest runs."""
    emulated = MODE != "gpu" and not (isinstance(fn, Variant) and fn.backend == "torch")
    first = CPU_BATCH_SIZES if emulated else BATCH_SIZES
    why = "an emulated kernel in cpu mode (the emulators are slow)" if emulated else ""
    for sizes in dict.fromkeys((first, CPU_BATCH_SIZES, (4, 2, 1))):
        if sizes[0] > first[0]:
            continue
        refused = _runs_here(fn, dt, {**base, dim: sizes[0]})
        if refused is None:
            if sizes != BATCH_SIZES:
                note = f"batches of {', '.join(map(str, sizes))} rows, not {', '.join(map(str, BATCH_SIZES))}: {why}"
                if note not in notes:
                    notes.append(note)
            return sizes
        why = refused
    return None


def check_invariance(fn: Callable, op: str | Op, name: str, *, deterministic: bool = False,
                     batch_invariant: bool = False, shapes: Sequence[dict] | None = None,
                     dtypes: Iterable[torch.dtype | str] | None = None, seeds: Sequence[int] = (0,),
                     time_limit: float | None = None, repeats: int | None = None) -> InvarianceReport:
    """Run the deterministic and/or batch-invariant modes of :func:`workbench.check` on ``fn``; return the report.

    ``shapes``: the shapes to run (batch invariance replaces their batch size); default: see
    :func:`_default_shapes`. ``dtypes``: default the first dtype ``fn`` supports here (float32 for a plain
    function when the op takes it). ``seeds``: the first one makes the inputs. ``repeats``: calls per shape in
    deterministic mode (default :data:`REPEATS`).
    """
    spec = get_op(op)
    if not (deterministic or batch_invariant):
        raise ValueError("check_invariance: ask for deterministic=True, batch_invariant=True or both")
    report = InvarianceReport(op=spec.name, name=name, cases=[])
    run = _Check(fn, spec, ck.time_limit_s(time_limit, fn), int(repeats) if repeats is not None else REPEATS)
    if run.repeats < 2:
        raise ValueError(f"check: repeats must be >= 2 to compare calls, got {repeats!r}")
    axes = batch_axes(spec) if batch_invariant else None  # raises first: an op without a batch axis
    run.axes = axes
    seed = int(list(seeds)[0]) if len(seeds) else 0
    dts = [as_dtype(d) for d in dtypes] if dtypes is not None else []
    if not dts:
        usable = fn.dtypes if isinstance(fn, Variant) else spec.dtypes
        plain = torch.float32 if torch.float32 in usable else usable[0]
        here = [d for d in usable if not isinstance(fn, Variant) or fn.why_not_here(d) is None]
        dts = [plain if plain in here or not here else here[0]]
    if deterministic and isinstance(fn, Variant) and getattr(fn, "deterministic", None) is False:
        report.notes.append(f"{fn.op}/{fn.name} is registered deterministic=False: {_DECLARED}")
    for dt in dts:
        if isinstance(fn, Variant) and fn.why_not_here(dt):
            ck._note_skip(report.skipped, fn.why_not_here(dt))
            continue
        if deterministic:
            _each(run, report, "deterministic", shapes, dt, seed)
        if batch_invariant:
            _each(run, report, "batch", shapes, dt, seed)
    return report


def _each(run: _Check, report: InvarianceReport, mode: str, shapes: Sequence[dict] | None, dt: torch.dtype,
          seed: int) -> None:
    """Run one mode over its shapes into ``report`` (a shape the variant refuses here is noted, not run)."""
    spec = run.spec
    dim = run.axes.dim if mode == "batch" else None
    todo = [dict(s) for s in shapes] if shapes is not None else _default_shapes(spec, run.fn, dt, dim)
    if not todo:
        ck._note_skip(report.skipped, f"{mode}: no check shape of {spec.name} runs here in {dtype_name(dt)}")
    for shape in todo:
        try:
            if mode == "deterministic":
                why = _runs_here(run.fn, dt, shape)
                if why:
                    ck._note_skip(report.skipped, why)
                    continue
                report.cases.append(_determinism(run, shape, dt, seed))
                continue
            sizes = _batch_sizes(run.fn, dt, shape, dim, report.notes)
            if sizes is None:
                ck._note_skip(report.skipped, _runs_here(run.fn, dt, {**shape, dim: CPU_BATCH_SIZES[-1]})
                              or f"batch: {spec.name} at {shape} does not run here")
                continue
            report.cases.append(_batch(run, shape, sizes, dt, seed))
        except UnsupportedHere as e:
            if not isinstance(run.fn, Variant):
                raise
            ck._note_skip(report.skipped, str(e))


# -------------------------------------------------------------------------------------------------------- table
@dataclass(frozen=True)
class InvarianceRow:
    """One variant's verdicts: ``deterministic`` and ``batch_invariant`` are "yes", "no" or "skipped", ``why``
    says what was run or why not."""

    op: str
    variant: str
    backend: str
    deterministic: str
    batch_invariant: str
    why_deterministic: str
    why_batch_invariant: str


_DECLARED = ("its reduction order is set by atomics or a lock, which varies from run to run on a GPU"
             + ("; the cpu-mode emulators run a launch's blocks in a fixed order, so they hardly ever show it"
                if MODE != "gpu" else ""))


def _verdict(report: InvarianceReport | None, mode: str, err: str | None) -> tuple[str, str]:
    if err is not None:
        return "skipped", err
    runs = [c for c in report.cases if c.probe == mode]
    if not runs:
        return "skipped", "; ".join(report.skipped) or "nothing ran here"
    bad = [c for c in runs if not c.ok]
    if not bad:
        return "yes", runs[0].detail
    first = bad[0]
    if first.diagnosis in ("nondeterministic_bits", "batch_variant"):
        return "no", first.detail
    return "skipped", f"wrong, so not judged: {first.diagnosis}: {first.detail or first.line()}"


def _table_row(v: Variant, shapes: dict[str, Sequence[dict]] | None) -> InvarianceRow:
    """Run both modes on one variant; a mode it cannot run (no batch axis, GPU-only) is 'skipped' with why."""
    given = (shapes or {}).get(v.op)
    cells = {}
    for mode, flag in (("deterministic", "deterministic"), ("batch", "batch_invariant")):
        rep, err = None, v.why_not_here()
        if err is None:
            try:
                rep = check_invariance(v, v.op, v.name, shapes=given, **{flag: True})
            except OpError as e:
                err = str(e)
        cells[mode] = _verdict(rep, mode, err)
    (d, dw), (b, bw) = cells["deterministic"], cells["batch"]
    declared = getattr(v, "deterministic", None)  # register(..., deterministic=): what the variant's author says
    if d == "yes" and declared is False:
        d, dw = "no (declared)", f"{dw} here, but registered deterministic=False: {_DECLARED}"
    elif d == "no" and declared is True:
        dw += "; registered deterministic=True, which this run contradicts"
    return InvarianceRow(v.op, v.name, v.backend, d, b, dw, bw)


class InvarianceTable:
    """The rows of :func:`invariance_table`; ``t["op/variant"]`` is an :class:`InvarianceRow`."""

    COLUMNS = ("op", "variant", "backend", "deterministic", "batch-invariant")

    def __init__(self, rows: list[InvarianceRow]) -> None:
        self.rows = rows

    def __getitem__(self, key: str) -> InvarianceRow:
        for r in self.rows:
            if f"{r.op}/{r.variant}" == key or (r.variant == key and sum(x.variant == key for x in self.rows) == 1):
                return r
        raise KeyError(f"invariance table: no row {key!r}; rows: {[f'{r.op}/{r.variant}' for r in self.rows]}")

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def notes(self) -> list[str]:
        """Return the footnotes: what a row's verdict rests on and where it was measured."""
        out = []
        if MODE != "gpu":
            out.append("cpu mode: the emulators run a launch's blocks one after another in a fixed order, so the "
                       "order atomics arrive in hardly varies here, and the split kernels use a fixed split count: "
                       "a 'yes' says this emulation gave the same bits; a GPU run can still differ (atomics, split "
                       "counts or configs chosen per batch)")
        return out

    def cells(self) -> list[tuple[str, ...]]:
        return [(r.op, r.variant, r.backend, r.deterministic, r.batch_invariant) for r in self.rows]

    def __str__(self) -> str:
        body = [self.COLUMNS, *self.cells()]
        widths = [max(len(row[i]) for row in body) for i in range(len(self.COLUMNS))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
        lines.insert(1, "  ".join("-" * w for w in widths))
        why = [f"{r.op}/{r.variant}: deterministic {r.deterministic}: {r.why_deterministic}; batch-invariant "
               f"{r.batch_invariant}: {r.why_batch_invariant}" for r in self.rows
               if (r.deterministic, r.batch_invariant) != ("yes", "yes")]
        return "\n".join(lines + why + self.notes())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = html.escape
        colour = {"yes": "#1a7f37", "no": "#cf222e"}
        head = "".join(f"<th>{e(c)}</th>" for c in self.COLUMNS)
        body = ""
        for r in self.rows:
            cells = [f"<td>{e(r.op)}</td><td>{e(r.variant)}</td><td>{e(r.backend)}</td>"]
            for verdict, why in ((r.deterministic, r.why_deterministic), (r.batch_invariant, r.why_batch_invariant)):
                cells.append(f"<td title='{e(why)}' style='color:{colour.get(verdict, '#555')}'>{e(verdict)}</td>")
            body += "<tr>" + "".join(cells) + "</tr>"
        foot = "".join(f"<div style='font-size:85%;color:#555'>{e(n)}</div>" for n in self.notes())
        return f"<div><table style='font-size:90%'><tr>{head}</tr>{body}</table>{foot}</div>"


def invariance_table(ops: str | Sequence[str] | None = None, variants: Sequence[str] | None = None, *,
                     shapes: dict[str, Sequence[dict]] | None = None) -> InvarianceTable:
    """Return a table of which variants are deterministic and batch-invariant: one row per variant of ``ops``.

    ``ops``: an op name or names (default: every op); ``variants``: only these variant names; ``shapes``: per op,
    the shapes to run instead of the defaults. Known-wrong kernels are left out. Each cell is "yes", "no" or
    "skipped"; the row's ``why_*`` fields say what ran or why not (GPU-only here, no batch axis, a wrong result).
    """
    from workbench.registry import ops as all_ops
    from workbench.registry import variants as variants_of

    names = [ops] if isinstance(ops, str) else list(ops) if ops is not None else all_ops()
    rows = []
    for op in names:
        for v in variants_of(op):
            if variants is None or v.name in variants:
                rows.append(_table_row(v, shapes))
    return InvarianceTable(rows)
