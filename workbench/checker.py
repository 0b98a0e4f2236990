"""The one checker: compare a kernel against the float64 reference and say what its wrong elements look like.

For every (shape, dtype, seed, input case) it makes fresh random inputs, runs the float64 reference, runs the
kernel with poisoned outputs (so an element it never writes shows up as a NaN with a payload no arithmetic
makes), and compares NaN/Inf aware with a
tolerance by dtype: ``|out - ref| <= atol + rtol * |ref|``. For fp16/bf16 it also applies flash-attention's rule:
an error up to 2x that of the same op run in torch at that dtype (against the same float64 reference) passes.

When elements are wrong it names the pattern:

- ``unwritten_rows``: whole rows never written: the grid does not cover every row;
- ``masking``: only the last partial tile (or the last element) of some dimension is wrong: tail / mask bug;
- ``missing_barrier``: whole tiles wrong while the rest is right: a shared-memory race;
- ``scale``: everything off by one constant factor;
- ``precision``: small errors spread everywhere: accumulation in too low a precision, a different rounding;
- ``special_values``: wrong where the reference is NaN/Inf: -inf rows, overflow;
- ``computed_nan``: NaN/Inf the kernel computed where the reference is finite (not the poison): an overflow;
- ``unwritten``: scattered elements never written; ``scattered``: anything else.

Before those patterns, an op may recognise its own classic mistakes by recomputing them (``Op.explain``):
``normalizer`` (softmax: each row, or each lane's share of it, off by one factor: a wrong max or sum),
``online_rescale`` and ``causal_diagonal`` (attention: running sums not rescaled; the mask wrong at the diagonal),
``swiglu`` (moe: a wrong expert activation), ``rope_convention`` (rope: the other pairing's rotation).
One such recomputation is the checker's own, for every op whose
signature contracts a dimension named ``K`` (gemm, gemm_fp8): ``k_tail``, the output equals the reference computed
without the last partial K tile, for some power-of-two tile size: a K loop that runs over whole tiles only.

Every kernel call runs inside :func:`workbench._sanitize.sanitizing`, so the emulators check it as
compute-sanitizer would: the CPU engine runs CUDA C with memcheck, initcheck and racecheck, the Numba simulator
and the Triton interpreter check their accesses. What they find is the run's diagnosis, with the sanitizer's
message (thread or program, block, buffer, offset, source line):

- ``out_of_bounds``: a read or write outside a buffer (memcheck): a missing bounds check or mask;
- ``race``: two threads touch one address between the same two barriers, at least one writing, not atomically
  (racecheck): a missing ``__syncthreads()``, or a plain read-modify-write where an atomic is needed;
- ``uninitialized``: a read of shared memory no thread wrote (initcheck): a tile element never loaded.
- ``divergent_barrier``: a ``__syncthreads()`` or ``*_sync`` collective not every named thread reaches (synccheck).

The inputs are snapshotted before the call: a kernel that changes one fails with ``mutated_input`` (as
KernelBench's adversarial tests check), and the torch baseline of the fp16/bf16 rule runs on pristine inputs.
A function that raises is ``error`` (``SystemExit`` and any other ``BaseException`` but ``KeyboardInterrupt``
included); one that returns the wrong type, shape, dtype or device, or a ``torch.Tensor`` subclass (whose
comparisons could lie), ``bad_output``. A call that runs past the per-case time limit (60 s for a plain function,
``time_limit=``) is stopped: ``timeout``. The references and comparators are the checker's own, taken before the
function runs: whatever the call replaces in this module (or in torch's comparison functions) is put back before
its output is judged, and the run fails as ``tampered``. A drill in a backend checks that the backend did the work
(``outside_backend``: torch computing on the inputs, or an output no launch wrote). Beside the planned runs the
check adds probes: shapes drawn per call (the report names the seed), each flag value and special-value case, one
case past 2^16 elements, and repeats of one case, where a different verdict on the same inputs is
``nondeterministic``.

A distributed op (``Op.distributed``: all_reduce, reduce_scatter, ...) runs on the ranks of a process group
(:mod:`workbench.comm_check`), each case under two fault plans, which names its own mistakes: ``deadlock`` (every
unfinished rank waits in a communication call past the time limit; the detail names each rank's call),
``missing_wait`` (the outputs differ between the plans: a buffer read before ``wait()`` or reused while a send is
in flight), ``partial_sum`` (elements hold the sum over only some ranks), ``wrong_chunk`` (a rank returned another
rank's chunk) and, for the bus-bandwidth exercise, ``bus_factor``.

Two more modes judge bits, not closeness (:mod:`workbench.invariance`): ``check(..., deterministic=True)`` calls
the function several times on the same inputs, ``nondeterministic_bits`` when the outputs differ in any bit, and
``check(..., batch_invariant=True)`` computes each row in batches of 64, 7 and 1, ``batch_variant`` when a row's
bits depend on the batch it was computed in.

Speed: ``check(..., budgets={"sectors per store request": "<= 4"}, budget_shape={...})`` also holds a correct
kernel to performance budgets on ``wb.profile``'s counters (see :mod:`workbench.budgets`), measured at one stated
shape once every run is correct. A correct kernel that misses one is ``over_budget`` ("correct, but 32 sectors per
store request where 4 are possible: ..."), and the report is not a pass.
"""

from __future__ import annotations

import contextlib
import ctypes
import html
import inspect as _inspect
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from workbench import budgets as _budgets
from workbench.budgets import BudgetReport
from workbench.progressbar import track as progress_track
from workbench.registry import (
    Op,
    OpError,
    UnsupportedHere,
    Variant,
    as_dtype,
    dtype_name,
    get_op,
    is_poison,
    make_inputs,
    poisoning,
    variants,
)

DIAGNOSES = {
    "unwritten_rows": "whole rows were never written: the grid does not cover every row "
                      "(round the block count up: ceil(M / rows_per_block)) or a row loop exits early",
    "masking": "only the last partial tile (or the last element) of a dimension is wrong: a masking / tail bug "
               "(an off-by-one bound, or a kernel that only handles full tiles)",
    "missing_barrier": "whole tiles are wrong while the rest is right: a race on shared memory "
                       "(a missing __syncthreads()/barrier between loading a tile and using or overwriting it)",
    "scale": "every element is off by the same factor: a wrong scale (e.g. a missing 1/sqrt(D) or a double scale)",
    "precision": "small errors spread over (almost) every element: accumulation in too low a precision "
                 "(accumulate in fp32), an inexact fast-math path, or a rounding / quantization step that differs "
                 "from the contract's",
    "special_values": "wrong exactly where the reference is NaN/Inf: handling of -inf, all -inf rows or overflow",
    "unwritten": "scattered elements were never written (the poison survived): some threads skip their store",
    "computed_nan": "NaN or Inf where the reference is finite, and not the checker's poison, so the kernel computed "
                    "it: an overflow (exp of a large input without subtracting the row max first), inf - inf (a "
                    "rescale exp(m_old - m_new) while the running max is still -inf: a whole chunk or tile of -inf "
                    "needs the -inf guard), 0 / 0 (or an unwritten intermediate buffer cast into the output)",
    "scattered": "scattered wrong elements with no simple pattern: an indexing bug",
    "normalizer": "each row (or each lane's share of a row) is off by one constant factor: the row's max or sum is "
                  "wrong: a reduction that misses lanes or elements (shuffle offsets, too few butterfly steps, a "
                  "result not broadcast to every lane), counts padding (load masked lanes as -inf, not 0), or an "
                  "online sum not rescaled when the max moves",
    "online_rescale": "the online softmax's running sums are not rescaled when a row's max grows: when a key tile "
                      "raises m_i to m_new, multiply l_i and acc by exp(m_i - m_new) before adding the new tile",
    "causal_diagonal": "the causal mask is wrong at the diagonal: a query sees keys past itself (an off-by-one in "
                       "key <= query, or no mask inside the tile that straddles the diagonal) or misses keys up to "
                       "itself (key < query, or a key loop that stops before the diagonal tile)",
    "k_tail": "the K loop drops the last partial K tile: the output equals the product over K rounded down to a "
              "whole number of tiles (a loop bound like k0 + BK <= K, or K // BK steps); loop cdiv(K, BK) times and "
              "zero-fill (mask) the loads past K",
    "swiglu": "the expert activation is not SiLU(gate) * up: the up half is dropped, SiLU is left out or replaced by "
              "a sigmoid, or gate and up (rows 0..I-1 and I..2I-1 of w1) are swapped",
    "rope_convention": "the output is RoPE under the other convention: GPT-NeoX's rotate-half pairs (i, i + D/2) "
                       "where GPT-J's interleaved pairs (2i, 2i + 1) were asked for, or the other way round",
    "out_of_bounds": "the kernel read or wrote outside a buffer (memcheck): a missing bounds check (if (i < n), a "
                     "mask on tl.load/tl.store) or a wrong index; the message names the thread or program, the "
                     "buffer and the offset",
    "race": "two threads (or two Triton programs of one launch) touched the same address between the same two "
            "barriers, at least one writing, and not atomically (racecheck): a missing __syncthreads()/"
            "cuda.syncthreads() between writing shared memory and reading or overwriting it, or a plain "
            "read-modify-write or store where an atomic is needed",
    "uninitialized": "the kernel read shared memory that no thread wrote (initcheck): a tile element that is never "
                     "loaded (zero-fill the out-of-range ones), or a read before the writes without a barrier",
    "divergent_barrier": "a barrier or warp collective that not every thread it names reaches (synccheck): a "
                         "__syncthreads() inside a branch or after an early return, or a __shfl_*_sync/__ballot_sync "
                         "whose mask names lanes that exited or sit in another branch (use __activemask() or keep "
                         "every lane in the loop and guard the data instead)",
    "mutated_input": "the kernel changed one of its inputs: inputs are read-only, so write only to the outputs you "
                     "allocate (an in-place op on an input, or a store through the wrong pointer)",
    "over_budget": "every run is correct, but the kernel misses a performance budget: it moves more memory, "
                   "conflicts more or synchronises more than the exercise allows (the report names each budget, the "
                   "counted value and what is possible)",
    "timeout": "the call took longer than the checker's per-case time limit (an endless loop, a sleep, a wait "
               "that never ends); raise the limit with check(..., time_limit=seconds) if the work really is that long",
    "tampered": "the function changed the checker itself (replaced a function or class of workbench.checker) while "
                "it ran: the checker restored itself and does not take this run's verdict from the changed code",
    "nondeterministic": "the same inputs gave a right answer once and a wrong one on another call: state kept "
                        "between calls, a race that shows only sometimes, or a result that depends on the call count",
    "outside_backend": "the drill's backend did not do the work: torch computed on the inputs during the call, or "
                       "an output is not a buffer the backend's kernel launches wrote (a launch of a no-op kernel "
                       "beside torch arithmetic does not count)",
    "nondeterministic_bits": "the same inputs gave outputs that differ in their bits from call to call: a reduction "
                             "whose order varies (a float atomicAdd sums in arrival order, a lock-ordered partial "
                             "buffer), a config a tuner picks by timing, or state kept between calls; reduce in a "
                             "fixed order (per-block partials, then one ordered sum)",
    "batch_variant": "a row's output depends on the batch it was computed in: the kernel picks its reduction order "
                     "from the batch (a split count from B against the SM count, split-K when M is small, a tile "
                     "or config chosen per shape); fix the split size, not the count, so each row is reduced the "
                     "same way whatever the batch",

    "deadlock": "the ranks wait for each other forever: every unfinished rank sits in a communication call whose "
                "peer never posts the matching one (a blocking send to a rank that is itself sending, a receive "
                "from the wrong peer, a collective some ranks skip); post receives first (irecv) or pair the calls "
                "with isend/irecv",
    "missing_wait": "the result depends on when messages land: a buffer was read before wait() on its irecv handle, "
                    "or a send buffer was changed (reused) before wait() on its isend handle; under the checker's "
                    "two fault plans (data landing only at wait(), sends reading their buffer late) the outputs differ",
    "partial_sum": "elements hold the sum over only some of the ranks: a chunk was forwarded before it was fully "
                   "reduced (a ring's chunk index off by one: after the reduce-scatter rank r owns chunk r + 1), or "
                   "a step or a rank's contribution was skipped",
    "bus_factor": "the factor is not the bytes each rank's link carries divided by S, as traced in the ring: count "
                  "the ring's steps and what each step sends (an all-reduce is a reduce-scatter then an all-gather)",
    "wrong_chunk": "a rank returned another rank's chunk of the result (rank r must get chunk r of the sum, in "
                   "tensor_split's layout): the ring's indices are shifted by one, so the chunk a rank completes "
                   "is not its own",
    "error": "the kernel raised an exception",
    "bad_output": "the kernel returned an output of the wrong type, shape, dtype or device (or a torch.Tensor "
                  "subclass, which could change how it compares: return a plain torch.Tensor)",
}
# Diagnoses of a whole run (not of a pattern of wrong elements), most telling first: a report shows the first found.
RUN_DIAGNOSES = ("tampered", "out_of_bounds", "race", "divergent_barrier", "uninitialized", "mutated_input",
                 "deadlock", "timeout", "nondeterministic", "outside_backend", "error", "bad_output",
                 "nondeterministic_bits",
                 "batch_variant")
#: The per-case time limit of a plain (not registered) function, in seconds; ``WORKBENCH_CASE_TIME_LIMIT`` sets it.
DEFAULT_TIME_LIMIT_S = 60.0
_SANITIZER_DIAGNOSIS = {"memcheck": "out_of_bounds", "racecheck": "race", "initcheck": "uninitialized",
                        "synccheck": "divergent_barrier"}


@dataclass
class CaseResult:
    """The outcome of one (shape, dtype, seed, case) run."""

    shape: dict
    dtype: str
    seed: int
    case: str
    ok: bool
    n_elements: int = 0
    n_mismatch: int = 0
    max_abs_err: float = 0.0
    worst: dict | None = None  # {"index", "got", "expected", "abs_err", "tol"}
    first_indices: list[tuple[int, ...]] = field(default_factory=list)
    diagnosis: str | None = None
    detail: str = ""
    torch_err: float | None = None  # max |torch - ref| at this dtype, for the low-precision rule
    wrong_outputs: list[str] = field(default_factory=list)  # the outputs with wrong elements (multi-output ops)
    probe: str = ""  # a probe's kind ("drawn", "repeat", "flag", "special", "index width"); "" for a planned run

    def line(self) -> str:
        """Return one human-readable line for this case."""
        where = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        tag = f"{self.dtype} seed={self.seed}" + (f" case={self.case}" if self.case != "random" else "")
        tag += f" [{self.probe}]" if self.probe else ""
        if self.ok:
            return f"PASS  {where}  {tag}  max|err|={self.max_abs_err:.2e}"
        if self.diagnosis in RUN_DIAGNOSES:
            return f"FAIL  {where}  {tag}  {self.diagnosis}: {self.detail}"
        w = self.worst or {}
        at = f"{w['output']}{list(w.get('index', ()))}" if "output" in w else str(w.get("index"))
        return (f"FAIL  {where}  {tag}  {self.n_mismatch}/{self.n_elements} mismatches; worst at {at}: "
                f"got {w.get('got')}, expected {w.get('expected')} (tol {w.get('tol', float('nan')):.1e}); "
                f"first at {self.first_indices[:5]}; diagnosis: {self.diagnosis}")


@dataclass
class CheckReport:
    """What :func:`check` found: one :class:`CaseResult` per run, plus a diagnosis of the failures."""

    op: str
    name: str
    cases: list[CaseResult]
    skipped: list[str] = field(default_factory=list)
    budgets: BudgetReport | None = None  # the performance budgets, judged once every run is correct
    # Runs beyond the planned ones, which no one can memorise: shapes drawn from ``seed``, repeats of one case,
    # each flag value and special-value case the plan left out, one case past 2^16 elements (see check()).
    probes: list[CaseResult] = field(default_factory=list)
    seed: int | None = None  # the seed the drawn shapes came from: check(..., seed=seed) draws them again

    @property
    def runs(self) -> list[CaseResult]:
        """Return every run: the planned cases, then the probes."""
        return self.cases + self.probes

    @property
    def correct(self) -> bool:
        """True when every run matches the reference (whatever the budgets say)."""
        return bool(self.cases) and all(c.ok for c in self.runs)

    @property
    def ok(self) -> bool:
        """True when every run is correct and every performance budget is met."""
        return self.correct and (self.budgets is None or self.budgets.ok)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def failures(self) -> list[CaseResult]:
        """Return the failing planned cases, or (when every planned case passed) the failing probes."""
        return [c for c in self.cases if not c.ok] or [c for c in self.probes if not c.ok]

    @property
    def diagnosis(self) -> str | None:
        """Return the diagnosis key of the most informative failure (the largest failing case), or None."""
        fails = self.failures
        if not fails:
            return "over_budget" if self.correct and not self.ok else None
        return self.telling_failure.diagnosis

    @property
    def telling_failure(self) -> CaseResult | None:
        """Return the failure the diagnosis comes from: the first by RUN_DIAGNOSES' order, else the largest one.

        A failing planned case is preferred to a failing probe: the fixed shapes name the classic patterns best.
        """
        fails = self.failures
        if not fails:
            return None
        for d in RUN_DIAGNOSES:
            for c in fails:
                if c.diagnosis == d:
                    return c
        return max(fails, key=lambda c: c.n_elements)

    def summary(self) -> str:
        """Return a few lines: verdict, diagnosis and the failing cases."""
        n = len(self.cases)
        if not self.cases:
            return f"{self.op}/{self.name}: nothing was checked ({'; '.join(self.skipped) or 'no runnable case'})"
        if self.ok:
            more = f" (and {len(self.probes)} probes)" if self.probes else ""
            head = f"PASS {self.op}/{self.name}: {n} runs match the float64 reference{more}"
        elif self.correct:
            head = (f"SLOW {self.op}/{self.name}: all {n} runs match the float64 reference, but it misses "
                    f"{len(self.budgets.missed)} performance budget{'s' if len(self.budgets.missed) != 1 else ''}.\n"
                    f"  diagnosis: over_budget: {DIAGNOSES['over_budget']}")
        else:
            d = self.diagnosis
            bad = sum(not c.ok for c in self.runs)
            head = (f"FAIL {self.op}/{self.name}: {bad} of {len(self.runs)} runs are wrong.\n"
                    f"  diagnosis: {d}: {DIAGNOSES.get(d, '')}")
        lines = [head]
        if self.budgets is not None:
            lines.append(f"  budgets (wb.profile at {self.budgets.where}):")
            lines += [f"    {ln}" for ln in self.budgets.lines()]
        if not self.correct:
            first = self.telling_failure
            lines += ["  " + c.line() for c in ([first] + [c for c in self.failures if c is not first])[:6]]
        if self.probes or self.seed is not None:
            lines.append("  " + self.probe_line())
        if self.skipped:
            lines.append("  skipped: " + "; ".join(self.skipped[:4]) + (" ..." if len(self.skipped) > 4 else ""))
        return "\n".join(lines)

    def probe_line(self) -> str:
        """Return one line on the probes: the draw's seed (to replay it) and the shapes drawn, the other probes."""
        drawn = [c for c in self.probes if c.probe == "drawn"]
        kinds: dict[str, int] = {}
        for c in self.probes:
            if c.probe != "drawn":
                kinds[c.probe] = kinds.get(c.probe, 0) + 1
        shapes = "; ".join(sorted({", ".join(f"{k}={v}" for k, v in c.shape.items()) for c in drawn}))
        other = ", ".join(f"{n} {k}" for k, n in kinds.items())
        return (f"probes: drawn shapes (seed={self.seed}; wb.check(..., seed={self.seed}) replays them): "
                f"{shapes or 'none'}" + (f"; also {other}" if other else ""))

    def __str__(self) -> str:
        return self.summary()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        rows = "".join(
            f"<tr><td>{html.escape(', '.join(f'{k}={v}' for k, v in c.shape.items()))}</td><td>{c.dtype}</td>"
            f"<td>{c.seed}</td><td>{c.case}</td><td style='color:{'#1a7f37' if c.ok else '#cf222e'}'>"
            f"{'pass' if c.ok else 'FAIL'}</td><td>{c.n_mismatch}/{c.n_elements}</td><td>{c.max_abs_err:.2e}</td>"
            f"<td>{html.escape(c.diagnosis or '')}</td></tr>"
            for c in self.cases)
        head = html.escape(self.summary().splitlines()[0])
        diag = "" if self.ok else f"<p>{html.escape(self.summary().splitlines()[1].strip())}</p>"
        if self.budgets is not None:
            diag += (f"<p>budgets (wb.profile at {html.escape(self.budgets.where)}):</p><ul>"
                     + "".join(f"<li>{html.escape(ln)}</li>" for ln in self.budgets.lines()) + "</ul>")
        return (f"<div><b style='color:{colour}'>{head}</b>{diag}<details><summary>{len(self.cases)} runs</summary>"
                "<table><tr><th>shape</th><th>dtype</th><th>seed</th><th>case</th><th>result</th>"
                f"<th>mismatches</th><th>max |err|</th><th>diagnosis</th></tr>{rows}</table></details></div>")

    def raise_if_failed(self) -> CheckReport:
        """Raise AssertionError with the summary when any run failed; return self otherwise."""
        if not self.ok:
            raise AssertionError(self.summary())
        return self


# --------------------------------------------------------------------------------------------------- diagnosis


def _in_last_partial_tile(idx: torch.Tensor, size: int) -> bool:
    """True when every index lies in the last partial tile of some power-of-two tile size (or is the last one)."""
    if idx.numel() == 0:
        return False
    lo = int(idx.min())
    if lo == size - 1:
        return True
    t = 2
    while t < size:  # a tile of t needs at least one full tile before the partial one
        start = (size // t) * t
        if size % t and lo >= start:
            return True
        t *= 2
    return False


def _tiles_pattern(bad: torch.Tensor) -> bool:
    """True when the wrong elements of a 2-D map fill whole tiles and leave other tiles right."""
    rows, cols = bad.shape
    for t in (32, 16, 8):
        if rows < t or cols < t:
            continue
        r, c = (rows // t) * t, (cols // t) * t
        tiles = bad[:r, :c].reshape(r // t, t, c // t, t).float().mean(dim=(1, 3))
        touched = tiles > 0
        if touched.any() and (~touched).any() and tiles[touched].mean() > 0.5:
            return True
    return False


def diagnose(out: torch.Tensor, ref: torch.Tensor, bad: torch.Tensor, tol: torch.Tensor | None = None,
             poisoned: torch.Tensor | None = None) -> str:
    """Name the pattern of the wrong elements ``bad`` (a bool mask) of ``out`` against ``ref``.

    ``tol`` (the per-element tolerance) lets a pattern-free failure be told apart: an indexing bug leaves most
    elements exact and the wrong ones far off, a precision or rounding difference moves every element a little
    and only the tail of that spread crosses the tolerance. ``poisoned`` marks the elements still holding the
    checker's poison (``registry.is_poison`` of the raw output); without it every NaN counts as poison.
    """
    fin = torch.isfinite(ref)
    poison = bad & (torch.isnan(out) if poisoned is None else poisoned) & fin
    frac = bad.float().mean().item()
    named = (_non_finite(out, bad, fin, poison) or _unwritten_rows(out, bad, poison)  # first match wins, in order
             or _uniform_error(out, ref, fin, poison, frac) or _masking(out, bad, poison, frac))
    if named:
        return named
    if out.dim() >= 2:
        flat = bad.reshape(-1, out.shape[-2], out.shape[-1])
        if any(_tiles_pattern(b) for b in flat):
            return "missing_barrier"
    if poison.any():
        return "unwritten"
    if _within_precision(out, ref, bad, fin, tol):
        return "precision"
    return "scattered"


def _non_finite(out: torch.Tensor, bad: torch.Tensor, fin: torch.Tensor, poison: torch.Tensor) -> str | None:
    """Return 'special_values' (only non-finite references are wrong) or 'computed_nan' (mostly a made NaN/Inf)."""
    if (bad & ~fin).any() and not (bad & fin).any():
        return "special_values"
    computed = bad & fin & ~torch.isfinite(out) & ~poison
    if computed.any() and 2 * int(computed.sum()) >= int((bad & fin).sum()):  # most wrong elements: a NaN/Inf made
        return "computed_nan"
    return None


def _unwritten_rows(out: torch.Tensor, bad: torch.Tensor, poison: torch.Tensor) -> str | None:
    """Return 'unwritten_rows' when every wrong element lies in a row left wholly poisoned."""
    if out.dim() >= 2 and poison.any():
        rows = bad.reshape(-1, out.shape[-1])
        full = poison.reshape(-1, out.shape[-1]).all(dim=1)
        if full.any() and not rows[~full].any():
            return "unwritten_rows"
    return None


def _uniform_error(out: torch.Tensor, ref: torch.Tensor, fin: torch.Tensor, poison: torch.Tensor,
                   frac: float) -> str | None:
    """Return 'scale' (most elements off by one common factor) or 'precision' (all slightly off), else None."""
    good_ref = fin & (ref.abs() > 1e-3 * ref.abs().max().clamp_min(1e-30)) & ~torch.isnan(out)
    if not (frac > 0.5 and not poison.any() and good_ref.any()):
        return None
    ratio = (out[good_ref].double() / ref[good_ref].double())
    med = ratio.median().item()
    spread = (ratio - med).abs().median().item()
    if abs(med - 1) > 1e-2 and spread < 1e-3 * abs(med):
        return "scale"
    rel = ((out[good_ref].double() - ref[good_ref].double()).abs() / ref[good_ref].double().abs()).median()
    return "precision" if rel.item() < 5e-2 else None


def _masking(out: torch.Tensor, bad: torch.Tensor, poison: torch.Tensor, frac: float) -> str | None:
    """Return 'masking' when the wrong elements sit in the last partial tile of some dimension."""
    nz = bad.nonzero()
    for d in range(out.dim()):
        if out.shape[d] == 1:  # a size-1 dimension (B=1, H=1) has no tail to get wrong
            continue
        if _in_last_partial_tile(nz[:, d], out.shape[d]) and (frac < 1 or bool(poison.all())):
            return "masking"
    return None


def _within_precision(out: torch.Tensor, ref: torch.Tensor, bad: torch.Tensor, fin: torch.Tensor,
                      tol: torch.Tensor | None) -> bool:
    """Return True when everything is off by a fair share of the tolerance and nothing is far off."""
    if tol is None or not fin.any():
        return False
    ratio = ((out.double() - ref.double()).abs() / tol.double().clamp_min(1e-300))
    typical = ratio[fin].median().item()  # the middle element, wrong or not
    worst = ratio[bad & fin].max().item() if (bad & fin).any() else math.inf
    return typical >= 0.2 and worst <= 20


# ------------------------------------------------------------------------------------------------------ compare


def _compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (bad mask, tolerance map); NaN must match NaN, +-Inf must match exactly."""
    o, r = out.double().cpu(), ref.double().cpu()
    tol = atol + rtol * r.abs().nan_to_num(posinf=0.0, neginf=0.0)
    fin = torch.isfinite(r)
    err = (o - r).abs()
    bad = torch.zeros_like(r, dtype=torch.bool)
    bad |= fin & ~(err <= tol)  # a NaN in out where ref is finite compares False: bad
    bad |= torch.isnan(r) & ~torch.isnan(o)
    bad |= torch.isinf(r) & (o != r)
    return bad, tol


def close_to(out: torch.Tensor, alt: torch.Tensor, atol: float, rtol: float) -> bool:
    """Return True when ``out`` matches ``alt`` elementwise within ``atol + rtol * |alt|`` (NaN matches NaN)."""
    if out.shape != alt.shape:
        return False
    o, a = out.double(), alt.double()
    both_nan = torch.isnan(o) & torch.isnan(a)
    same_inf = torch.isinf(a) & (o == a)
    near = (o - a).abs() <= atol + rtol * a.abs().nan_to_num(posinf=0.0, neginf=0.0)
    return bool((both_nan | same_inf | near).all())


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _signature_args(signature: str) -> list[str]:
    """Return the top-level arguments of ``"op(a[M,K], w1s[E,G(2I),G(d)], top_k=1) -> ..."``, shapes included."""
    body = signature.split("(", 1)[1]
    args, cur, depth = [], "", 0
    for ch in body:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:  # the closing parenthesis of the argument list
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [a for a in (*args, cur.strip()) if a]


def _signature_error(fn: Callable, op: Op) -> str | None:
    """Return why ``fn`` cannot be called like ``op``, or None."""
    try:
        sig = _inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty]
    n_args = len([a for a in _signature_args(op.signature) if "=" not in a])
    has_var = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    if len(required) > n_args or (len(params) < n_args and not has_var):
        return (f"{op.name}: your function has signature {getattr(fn, '__name__', 'fn')}{sig}, but it is called as "
                f"{op.signature.split(' ->')[0]} ({n_args} positional inputs)")
    return None


def check(fn: Variant | Callable[..., torch.Tensor], op: str | None = None, *,
          shapes: Sequence[dict] | None = None, dtypes: Iterable[torch.dtype | str] | None = None,
          seeds: Sequence[int] = (0, 1), cases: Sequence[str] | None = None, quick: bool = False,
          raise_on_fail: bool = False, progress: bool | None = None, budgets: Mapping[str, str] | None = None,
          budget_shape: dict | None = None, budget_dtype: torch.dtype | str | None = None,
          time_limit: float | None = None, seed: int | None = None, probes: bool = True,
          fixed_flags: Sequence[str] = (), runs_like: Variant | None = None, deterministic: bool = False,
          batch_invariant: bool = False) -> CheckReport:
    """Check ``fn`` (a registered :class:`Variant` or any function called like the op) against the reference.

    Defaults: the op's ragged check shapes, every dtype the variant supports here, seeds 0 and 1, and every
    input case of the op (softmax adds -inf/overflow rows and NaN inputs), each on the shapes the op's
    ``case_shapes`` picks for it (all, unless a case is costly); cases passed explicitly run on every shape.
    ``quick`` checks only the first dtype and one seed (all shapes and cases). Returns a :class:`CheckReport`
    (truthy when everything passed). ``progress`` shows a bar of the cases (None: :func:`workbench.progressbar.enabled`
    decides; ``WORKBENCH_PROGRESS=0`` hides it).

    ``budgets`` (``{metric: "<= 4  # why"}``, see :mod:`workbench.budgets`) are judged once every run is correct,
    on one ``wb.profile`` call at ``budget_shape`` (default: the op's cpu bench shape) and ``budget_dtype``
    (default: the first dtype checked): a miss makes the report ``over_budget``, not a pass.

    ``time_limit`` (seconds) stops a call that runs longer with the ``timeout`` diagnosis; a plain function gets
    ``WORKBENCH_CASE_TIME_LIMIT`` or 60 s by default, a registered variant no limit (see :func:`_time_limit` for
    what it cannot interrupt). Whatever the function raises (``SystemExit`` included; not ``KeyboardInterrupt``)
    is a failed run, and what it changes of the checker while it runs is put back and fails the run (``tampered``).

    Beside the planned runs, ``probes`` (the report's ``probes``) no one can memorise: shapes drawn at random around
    the op's edge sizes and tile multiples (``seed``: the draw's seed, fresh each call unless given; the report
    names it, and ``check(..., seed=...)`` draws the same shapes again); repeats of the cheapest case (same inputs,
    a different verdict is ``nondeterministic``); each value of the op's flags (``renormalize=False``,
    ``causal=True``, ...) and each special-value case the plan left out; one case past 2^16 elements for the
    cheap ops. The probes run once every planned case passed (a failure in the plan is the verdict already);
    ``probes=False`` runs the plan only. ``fixed_flags`` names flags the caller's shapes fix on purpose
    (an exercise that covers only ``causal=False``): their other values are not probed. ``runs_like`` is a
    registered variant whose limits (``why_not_here``) also bound the probes' shapes: an implement drill passes its
    model answer, so a probe never asks for a size the drill's statement rules out (a head dim the model refuses).

    ``deterministic=True`` / ``batch_invariant=True`` run the bitwise modes of :mod:`workbench.invariance` instead
    (``shapes``, ``dtypes``, ``seeds``, ``time_limit`` and ``raise_on_fail`` apply; the first output of each run is
    still compared with the reference).
    """
    if runs_like is not None and not isinstance(runs_like, Variant):
        raise TypeError(f"check: runs_like must be a registered Variant, got {type(runs_like).__name__}")
    if isinstance(fn, Variant):
        op = op or fn.op
        if op != fn.op:
            raise ValueError(f"check: variant {fn.op}/{fn.name} is not a variant of op {op!r}")
        name = fn.name
    else:
        if op is None:
            raise TypeError("check(fn, op): name the op a plain function implements, e.g. check(my_gemm, 'gemm')")
        if not callable(fn):
            raise TypeError(f"check: expected a Variant or a callable, got {type(fn).__name__}")
        name = getattr(fn, "__name__", "fn")
    spec = get_op(op)
    if not isinstance(fn, Variant):
        why = _signature_error(fn, spec)
        if why:
            raise TypeError(why)
    if spec.distributed:  # all_reduce, ...: run on ranks of a process group (workbench/comm_check.py)
        from workbench.comm_check import check_distributed

        return check_distributed(fn, spec, name, shapes=shapes, dtypes=dtypes, seeds=seeds, quick=quick,
                                 time_limit=time_limit, seed=seed, probes=probes, raise_on_fail=raise_on_fail,
                                 deterministic=deterministic, batch_invariant=batch_invariant)
    if deterministic or batch_invariant:
        from workbench.invariance import check_invariance

        rep = check_invariance(fn, spec, name, deterministic=deterministic, batch_invariant=batch_invariant,
                               shapes=shapes, dtypes=dtypes, seeds=seeds, time_limit=time_limit)
        return rep.raise_if_failed() if raise_on_fail else rep
    limits = _budgets.parse(budgets, f"check {spec.name}/{name}") if budgets else []
    limit = time_limit_s(time_limit, fn)
    report = CheckReport(op=spec.name, name=name, cases=[])
    baseline = _torch_baseline(spec.name)
    plan, all_dtypes, cases, seeds = _plan(fn, spec, dtypes, shapes, cases, seeds, quick, report.skipped)
    run = _Runner(fn, spec, baseline, limit, report)
    run.like = runs_like
    simulated = _simulated_launches()
    for shape, dt, seed_, case in progress_track(plan, f"check {spec.name}/{name}", describe=_case_label,
                                                 progress=progress):
        run.planned(shape, dt, seed_, case)
    run.simulated = _simulated_launches() > simulated
    if probes and report.cases and all(c.ok for c in report.cases):  # a failed plan is the verdict already
        report.seed = _draw_seed(seed)
        _run_probes(run, plan, cases, list(seeds)[0] if len(seeds) else 0, _fixed(spec, fixed_flags))
    if limits and report.correct:
        shape = dict(budget_shape) if budget_shape is not None else _budgets.default_shape(spec.name)
        report.budgets = _budgets.measure(fn, spec.name, limits, shape,
                                          as_dtype(budget_dtype) if budget_dtype is not None else all_dtypes[0])
    if raise_on_fail:
        report.raise_if_failed()
    return report


def _plan(fn: Callable, spec: Op, dtypes: Sequence | None, shapes: Sequence[dict] | None,
          cases: Sequence[str] | None, seeds: Sequence[int], quick: bool, skipped: list[str]) -> tuple:
    """Return (plan, dtypes, cases, seeds) of a check: its defaults filled in, ``quick`` applied."""
    plain = (torch.float32,) if torch.float32 in spec.dtypes else spec.dtypes[:1]  # a plain function: one dtype
    all_dtypes = [as_dtype(d) for d in (dtypes if dtypes is not None else
                                        (fn.dtypes if isinstance(fn, Variant) else plain))]
    shapes = list(shapes if shapes is not None else spec.check_shapes)
    pick = {} if cases is not None else spec.case_shapes  # asked-for cases run on every shape
    cases = list(cases if cases is not None else spec.cases)
    if quick:  # every ragged shape still runs: tails and partial tiles hide in different ones
        all_dtypes, seeds = all_dtypes[:1], list(seeds)[:1]
    return _plan_cases(fn, all_dtypes, shapes, cases, pick, seeds, skipped), all_dtypes, cases, seeds


def drawn_probes(fn: Variant, seed: int, *, dtypes: Sequence | None = None, shapes: Sequence[dict] | None = None,
                 cases: Sequence[str] | None = None, seeds: Sequence[int] = (0, 1), quick: bool = False,
                 runs_like: Variant | None = None) -> list[tuple[dict, torch.dtype, int]]:
    """Return the drawn probes ``check(fn, ..., seed=seed)`` runs once its plan passed: (shape, dtype, input seed).

    Nothing runs: the same plan and the same draw as :func:`check` (scripts/sweep-drawn.py runs them one by one).
    """
    spec = get_op(fn.op)
    plan = _plan(fn, spec, dtypes, shapes, cases, seeds, quick, [])[0]
    if not plan:
        return []
    run = _Runner(fn, spec, None, None, CheckReport(op=spec.name, name=fn.name, cases=[]))
    run.like = runs_like
    return _draws(run, plan, np.random.default_rng(_draw_seed(seed)))


def _draws(run: _Runner, plan: list[tuple[dict, torch.dtype, int, str]],
           rng: np.random.Generator) -> list[tuple[dict, torch.dtype, int]]:
    """Draw a check's probe shapes (1 for a registered variant, 2 for a function), each with its input seed."""
    dt0 = plan[0][1]
    shapes = list({tuple(s.items()): s for s, _, _, _ in plan}.values())
    drawn = _draw_shapes(run, shapes, dt0, rng, 1 if isinstance(run.fn, Variant) else 2)
    return [(shape, dt0, int(rng.integers(2**31))) for shape in drawn]


class _Runner:
    """Run one check's cases into its report: the planned ones, then the probes (same function and rules)."""

    def __init__(self, fn: Callable, spec: Op, baseline: Variant | None, limit: float | None,
                 report: CheckReport) -> None:
        self.fn, self.spec, self.baseline, self.limit, self.report = fn, spec, baseline, limit, report
        self.refused: set[tuple] = set()  # (dtype, shape) a variant found it cannot run while running
        self.calls = 0
        self.t0 = time.monotonic()
        self.simulated = False  # the planned runs launched kernels in the Numba simulator
        self.like: Variant | None = None  # a variant whose limits also bound the probes' shapes (check's runs_like)

    def one(self, shape: dict, dt: torch.dtype, seed: int, case: str) -> CaseResult | None:
        """Run one case; None when the variant found it cannot run it here (noted in the report's skipped)."""
        where = (dt, tuple(shape.items()))
        if where in self.refused:
            return None
        try:
            self.calls += 1
            return _run_case(self.fn, self.spec, shape, dt, seed, case, self.baseline, self.limit)
        except UnsupportedHere as e:  # found while running (a bf16 tl.dot in the interpreter, ...)
            if not isinstance(self.fn, Variant):
                raise
            self.refused.add(where)
            _note_skip(self.report.skipped, str(e))
            return None

    def planned(self, shape: dict, dt: torch.dtype, seed: int, case: str) -> None:
        res = self.one(shape, dt, seed, case)
        if res is not None:
            self.report.cases.append(res)

    def probe(self, kind: str, shape: dict, dt: torch.dtype, seed: int, case: str) -> CaseResult | None:
        """Run one probe (unless the variant, or ``runs_like``, cannot take its shape here: noted in skipped)."""
        why = next((v.why_not_here(dt, shape) for v in (self.fn, self.like)
                    if isinstance(v, Variant) and v.why_not_here(dt, shape)), None)
        if why:
            _note_skip(self.report.skipped, f"{kind} probe: {why}")
            return None
        res = self.one(shape, dt, seed, case)
        if res is not None:
            res.probe = kind
            self.report.probes.append(res)
        return res


#: Repeats of the cheapest case: a plain function is called until the check made this many calls (a function
#: wrong on 8% of its calls then passes with probability 0.92^100 < 0.03%), within the time bound below.
REPEAT_CALLS = 100
#: The repeats stop once they took this share of the check's time so far (and at least REPEAT_MIN_S).
REPEAT_SHARE, REPEAT_MIN_S = 0.1, 0.3


def _draw_seed(seed: int | None) -> int:
    if seed is None:
        return int.from_bytes(os.urandom(4), "little") % 1_000_000
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"check: seed (the draw of the probe shapes) must be an int >= 0, got {seed!r}")
    return seed


def _fixed(spec: Op, fixed_flags: Sequence[str]) -> set[str]:
    """Return the flags a caller fixes on purpose (an exercise that covers only ``causal=False``), checked."""
    unknown = sorted(set(fixed_flags) - set(spec.flags))
    if unknown:
        raise ValueError(f"check: fixed_flags {unknown} are not flags of {spec.name} (its flags: {list(spec.flags)})")
    return set(fixed_flags)


def _run_probes(run: _Runner, plan: list[tuple[dict, torch.dtype, int, str]], cases: Sequence[str],
                seed0: int, pinned: set[str] = frozenset()) -> None:
    """Run the probes of a check after its plan: drawn shapes, flag values, special values, index width, repeats."""
    report, spec = run.report, run.spec
    ran = [c for c in report.cases]
    dt0 = plan[0][1]
    shapes = list({tuple(s.items()): s for s, _, _, _ in plan}.values())
    for shape, dt, input_seed in _draws(run, plan, np.random.default_rng(report.seed)):
        run.probe("drawn", shape, dt, input_seed, "random")
    # A plain function's flags run at the median shape (at the cheapest a flag may not matter: renormalize with
    # top_k = E); a registered variant's at the cheapest roomy one (emulation is slow, the suite runs every variant).
    small = _cheapest(spec, shapes) if isinstance(run.fn, Variant) else _median(spec, shapes)
    for flag, values in spec.flags.items():
        if flag in pinned:
            continue
        have = {_flag_value(spec, c.shape, flag) for c in ran + report.probes}
        for v in values:
            if v not in have:
                run.probe("flag", {**small, flag: v}, dt0, seed0, "random")
    for case in spec.specials:
        if case not in cases:
            run.probe("special", _special_shape(spec, shapes, case), dt0, seed0, case)
    if spec.wide_shape is not None:
        _wide_probe(run, dt0, seed0)
    _repeats(run)


def _flag_value(spec: Op, shape: dict, flag: str) -> object:
    """Return the value of ``flag`` a run with ``shape`` used: its own, else the first (the default) declared."""
    return shape.get(flag, spec.flags[flag][0])


def _cost(spec: Op, shape: dict) -> int:
    n = 1
    for k in spec.shape_keys:
        n *= max(1, int(shape.get(k, 1)))
    return n


def _cheapest(spec: Op, shapes: Sequence[dict]) -> dict:
    """Return the cheapest shape with at least 3 along every size (the cheapest at all when none has)."""
    roomy = [s for s in shapes if all(int(s[k]) >= 3 for k in spec.shape_keys if k in s)]
    return min(roomy or list(shapes), key=lambda s: _cost(spec, s))


def _median(spec: Op, shapes: Sequence[dict]) -> dict:
    """Return the shape of lower-median cost."""
    ranked = sorted(shapes, key=lambda s: _cost(spec, s))
    return ranked[(len(ranked) - 1) // 2]


def _special_shape(spec: Op, shapes: Sequence[dict], case: str) -> dict:
    picks = spec.case_shapes.get(case)
    fit = [s for s in shapes if picks is None or picks(s)]
    return _cheapest(spec, fit or shapes)


def _wide_probe(run: _Runner, dt: torch.dtype, seed: int) -> None:
    fn, shape = run.fn, dict(run.spec.wide_shape or {})
    n = _cost(run.spec, shape)
    if run.simulated or (isinstance(fn, Variant) and fn.backend == "numba" and not fn.native):
        _note_skip(run.report.skipped, f"index width probe ({n} elements): left out under the Numba simulator "
                                       "(one OS thread per CUDA thread); a GPU runs it")
        return
    run.probe("index width", shape, dt, seed, "random")


def _simulated_launches() -> int:
    """Return how many kernels Numba's simulator launched in this process (0 when it was never loaded)."""
    sim = sys.modules.get("workbench._numba_sim")
    return int(getattr(sim, "LAUNCHES", 0))


def _candidates(v: int, lo: int, hi: int) -> list[int]:
    """Return the sizes near ``v`` (+-1, +-2) and the tile multiples (8 to 128, +-1) between v/2 and 2v, in [lo, hi]."""
    near = {v + d for d in (-2, -1, 1, 2)}
    tiles = {t * m + d for t in (8, 16, 32, 64, 128) for m in (1, 2, 3) for d in (-1, 0, 1)}
    return sorted(x for x in near | {x for x in tiles if v // 2 <= x <= 2 * v} | {1, 2, 3} if lo <= x <= hi)


def _draw_shapes(run: _Runner, shapes: Sequence[dict], dt: torch.dtype, rng: np.random.Generator,
                 n: int) -> list[dict]:
    """Draw ``n`` shapes unlike the planned ones: a planned shape no costlier than their lower median, with some
    sizes moved to a nearby size or tile multiple; as cheap (at most 2x the median), valid for the op and
    runnable by the variant."""
    spec = run.spec
    keys = [k for k in spec.shape_keys if all(k in s for s in shapes)]
    if not keys or not shapes:
        return []
    ranked = sorted(_cost(spec, s) for s in shapes)
    # A registered variant's drawn shape is as cheap as the second-cheapest planned one (the suite runs them all)
    bound = ranked[min(1, len(ranked) - 1)] if isinstance(run.fn, Variant) else _cost(spec, _median(spec, shapes))
    bases = [s for s in shapes if _cost(spec, s) <= bound]
    seen = {tuple(sorted(s.items())) for s in shapes}
    picks: list[dict] = []
    for _ in range(60 * n):
        if len(picks) == n:
            break
        shape = dict(bases[int(rng.integers(len(bases)))])
        for k in keys:
            col = [int(s[k]) for s in shapes]
            opts = _candidates(int(shape[k]), max(1, min(col)), max(col))
            if opts and rng.random() < 0.6:
                shape[k] = int(opts[int(rng.integers(len(opts)))])
        key = tuple(sorted(shape.items()))
        if key in seen or _cost(spec, shape) > max(2 * bound, 8) or not _valid(run, shape, dt):
            continue
        seen.add(key)
        picks.append(shape)
    return picks


def _valid(run: _Runner, shape: dict, dt: torch.dtype) -> bool:
    """Return True when the op can make inputs at ``shape`` and the variant (and ``runs_like``) runs it here."""
    for v in (run.fn, run.like):
        if isinstance(v, Variant) and v.why_not_here(dt, shape):
            return False
    try:
        make_inputs(run.spec.name, dtype=dt, seed=0, **shape)
    except OpError:
        return False
    return True


def _repeats(run: _Runner) -> None:
    """Repeat the cheapest passing planned case: a different verdict on the same inputs is ``nondeterministic``."""
    base = [c for c in run.report.cases if c.ok and c.case == "random"]
    if not base:
        return
    first = min(base, key=lambda c: (_cost(run.spec, c.shape), c.seed))
    dt = as_dtype(first.dtype)
    budget = max(REPEAT_MIN_S, REPEAT_SHARE * (time.monotonic() - run.t0))
    want = 1 if isinstance(run.fn, Variant) else max(1, REPEAT_CALLS - run.calls)
    t0 = time.monotonic()
    for i in range(want):
        if i and time.monotonic() - t0 > budget:
            break
        res = run.one(first.shape, dt, first.seed, first.case)
        if res is None:
            return
        if not res.ok:
            res.probe = "repeat"
            was = res.line()
            res.diagnosis, res.detail = "nondeterministic", (
                f"call {run.calls} on the inputs that passed before ({first.dtype} seed={first.seed}) "
                f"failed: {was.split('  ', 2)[-1]}")
            run.report.probes.append(res)
            return
    run.report.probes.append(CaseResult(shape=dict(first.shape), dtype=first.dtype, seed=first.seed,
                                        case=first.case, ok=True, n_elements=first.n_elements,
                                        max_abs_err=first.max_abs_err, probe="repeat",
                                        detail=f"{i + 1} repeats, every one right"))


def judge_output(fn: Callable, op: str | Op, inputs: tuple, kw: dict, out: object, dt: torch.dtype,
                 shape: dict) -> CaseResult:
    """Judge one output ``out`` a call of ``fn`` returned on ``inputs`` (wb.bench's timed call) like a checked run.

    The reference runs on the same inputs; the tolerance is the op's (with the fp16/bf16 rule against the torch
    baseline). Returns a :class:`CaseResult` of case ``"bench"``: ``ok``, or the mismatches and their diagnosis.
    """
    spec = get_op(op)
    res = CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=0, case="bench", ok=False)
    ref = spec.reference(*inputs, **kw)
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    baseline = _torch_baseline(spec.name)
    touts = None
    if dt in (torch.float16, torch.bfloat16) and baseline is not None and fn is not baseline:
        t = baseline.fn(*inputs, **kw)
        touts = list(t) if isinstance(t, (tuple, list)) else [t]
    outs = _outputs(res, spec, out, refs, inputs, dt)
    if outs is None:
        return res
    if spec.canonical is not None:
        outs = list(spec.canonical(outs, refs, *inputs, **kw))
    _compare_outputs(res, spec, shape, dt, outs, refs, touts)
    return res


def compare_output(op: str | Op, out: torch.Tensor | Sequence[torch.Tensor],
                   ref: torch.Tensor | Sequence[torch.Tensor], dt: torch.dtype, shape: dict, *,
                   torch_out: torch.Tensor | Sequence[torch.Tensor] | None = None, inputs: tuple | None = None,
                   case: str = "random", seed: int = 0) -> CaseResult:
    """Judge an output computed elsewhere (spawned ranks, another process) against the float64 reference ``ref``.

    The comparison of a checked run: the op's tolerance for ``dt`` and ``shape``; NaN must match NaN and +-Inf
    match exactly; in fp16/bf16 up to 2x the error of ``torch_out`` (the torch baseline's output at ``dt``); the
    worst element and a diagnosis. With ``inputs`` the op's recomputed classic mistakes are named too. Nothing runs
    here and the outputs may sit on any device; an output whose count, type, shape or dtype is not the contract's
    fails as ``bad_output``. Returns a :class:`CaseResult` (``ok``, ``line()``, ``diagnosis``...).
    """
    spec = get_op(op)
    res = CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=seed, case=case, ok=False)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    want = spec.out_dtypes(dt) if spec.out_dtypes is not None else (dt,) * len(refs)
    fits = len(outs) == len(refs) and all(isinstance(o, torch.Tensor) and o.shape == r.shape and o.dtype == w
                                          for o, r, w in zip(outs, refs, want, strict=False))
    if not fits:
        got = [(tuple(t.shape), dtype_name(t.dtype)) if isinstance(t, torch.Tensor) else type(t).__name__
               for t in outs]
        res.diagnosis, res.detail = "bad_output", (
            f"got {got}, expected {[(tuple(t.shape), dtype_name(d)) for t, d in zip(refs, want, strict=True)]}")
        return res
    touts = None
    if dt in (torch.float16, torch.bfloat16) and torch_out is not None:
        touts = list(torch_out) if isinstance(torch_out, (tuple, list)) else [torch_out]
    if inputs is not None and spec.canonical is not None:
        outs = list(spec.canonical(outs, refs, *inputs, **spec.split(shape)[1]))
    _compare_outputs(res, spec, shape, dt, outs, refs, touts)
    if not res.ok and inputs is not None:
        res.diagnosis = _recomputed_diagnosis(spec, res, outs, refs, inputs, shape, dt) or res.diagnosis
    return res


def _plan_cases(fn: Callable, all_dtypes: Sequence[torch.dtype], shapes: Sequence[dict], cases: Sequence[str],
                pick: dict[str, Callable[[dict], bool]], seeds: Sequence[int],
                skipped: list[str]) -> list[tuple[dict, torch.dtype, int, str]]:
    """Return the (shape, dtype, seed, case) runs of a check in order; note in ``skipped`` why shapes are left out.

    A case the op's ``case_shapes`` (``pick``) restricts runs only on the shapes it picks.
    """
    plan = []
    for dt in all_dtypes:
        for shape in shapes:
            why = fn.why_not_here(dt, shape) if isinstance(fn, Variant) else None
            if why:
                _note_skip(skipped, why)
                continue
            for case in cases:
                if case in pick and not pick[case](shape):
                    continue
                for seed in (seeds if case == "random" else list(seeds)[:1]):
                    plan.append((shape, dt, seed, case))
    return plan


def _note_skip(skipped: list[str], why: str) -> None:
    """Record why runs were left out, one line per reason (not one per shape)."""
    if why not in skipped:
        skipped.append(why)


def _case_label(run: tuple[dict, torch.dtype, int, str]) -> str:
    """Name one planned run for the progress bar: dtype, shape, input case and seed."""
    shape, dt, seed, case = run
    return f"{dtype_name(dt)} {' '.join(f'{k}={v}' for k, v in shape.items())} {case} seed {seed}"


def _torch_baseline(op: str) -> Variant | None:
    for v in variants(op):
        if v.backend == "torch":
            return v
    return None



def _find_in_chain(e: BaseException, types: type | tuple[type, ...]) -> BaseException | None:
    """Return the first exception of ``types`` in ``e``'s cause/context chain (``e`` included), or None."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, types):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _user_frame(e: BaseException) -> str:
    """Return ' (at file:line)' of the innermost frame outside the libraries and the workbench, else the last."""
    import sysconfig
    from pathlib import Path

    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""
    skip = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    skip.add(str(Path(__file__).resolve().parent))
    mine = [f for f in tb if not any(f.filename.startswith(p) for p in skip) and "site-packages" not in f.filename]
    f = (mine or tb)[-1]
    return f" (at {f.filename}:{f.lineno})"


def _failed_call(res: CaseResult, e: BaseException, limit: float | None = None) -> CaseResult:
    """Fill ``res`` for a call that raised: a timeout, a sanitizer's finding, or the exception and where it was."""
    from workbench.cuda.errors import SanitizerError

    if isinstance(e, BackendWorkError):
        res.diagnosis, res.detail = "outside_backend", str(e)
        return res
    if isinstance(e, CaseTimeout):
        res.diagnosis, res.detail = "timeout", (f"took longer than {limit or (e.args or (0,))[0]:g} s{_user_frame(e)} "
                                                 "and was stopped")
        return res
    found = _find_in_chain(e, SanitizerError)
    if found is not None:
        res.diagnosis = _SANITIZER_DIAGNOSIS.get(getattr(found, "tool", ""), "error")
        res.detail = str(found)
        return res
    res.diagnosis, res.detail = "error", f"raised {type(e).__name__}: {e}{_user_frame(e)}"
    return res


@contextlib.contextmanager
def _quiet_floating_point() -> Iterator[None]:
    """Silence numpy's floating-point RuntimeWarnings of the emulators (-inf - -inf ...): the checker judges values."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.filterwarnings("ignore", message=r".*(encountered|empty slice)", category=RuntimeWarning)
        yield


@contextlib.contextmanager
def quiet_floating_point() -> Iterator[None]:
    """Silence the emulators' floating-point RuntimeWarnings while a call whose values are judged elsewhere runs.

    The checker's runs use it; so does anything else that runs a kernel on its behalf (the budgets' profiled call).
    """
    with _quiet_floating_point():
        yield


def _input_names(spec: Op) -> list[str]:
    """Return the names of the op's positional inputs ('a', 'b' of 'gemm(a[M,K], b[K,N])')."""
    return [re.split(r"[\[=]", a, maxsplit=1)[0].strip() for a in _signature_args(spec.signature)]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Return ``t``'s elements as integers of the same width (NaN payloads and -0.0 compare exactly)."""
    flat = t.detach().reshape(-1)
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(flat.element_size())
    if width is None or flat.dtype == width:
        return flat.clone()
    return flat.view(width).clone() if flat.dtype != torch.bool else flat.to(torch.uint8)


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Return the index of element ``flat`` of a C-contiguous array of ``shape`` (what torch.unravel_index gives,
    without its first call's import of torch's reference ops: seconds, in every process that sees a failure)."""
    out = []
    for n in reversed(tuple(shape)):
        flat, i = divmod(flat, max(int(n), 1))
        out.append(i)
    return tuple(reversed(out))


def _mutated(spec: Op, inputs: tuple, before: list[torch.Tensor | None]) -> str | None:
    """Return which input the call changed and where (compared bit for bit with the snapshot), or None."""
    names = _input_names(spec)
    for i, (t, snap) in enumerate(zip(inputs, before, strict=True)):
        if snap is None:
            continue
        now = _bits(t)
        if now.shape == snap.shape and torch.equal(now, snap):
            continue
        name = names[i] if i < len(names) else f"input {i}"
        if now.shape != snap.shape:
            return f"input {name} changed shape: {tuple(snap.shape)} -> {tuple(t.shape)}"
        changed = (now != snap).nonzero().reshape(-1)
        idx = [_unravel(int(k), t.shape) for k in changed[:3]]
        flat = t.detach().reshape(-1)
        k = int(changed[0])
        return (f"input {name} was changed by the call: {changed.numel()}/{t.numel()} elements differ afterwards, "
                f"first at {idx}; {name}{list(idx[0])} is now {_fmt(float(flat[k]))}")
    return None


class BackendWorkError(RuntimeError):
    """Raised by a drill's guard when the work of a call was not done by the drill's backend (``outside_backend``)."""


class CaseTimeout(BaseException):
    """Raised into a call that ran past the checker's per-case time limit (a BaseException: ``except Exception``
    in the learner's code does not swallow it)."""


def time_limit_s(given: float | None, fn: Callable) -> float | None:
    """Return the per-case time limit of a check: ``given``, else ``WORKBENCH_CASE_TIME_LIMIT`` or 60 s for a plain
    function (None: no limit, the default for a registered variant)."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, (int, float)) or not given > 0:
            raise ValueError(f"check: time_limit must be a number of seconds > 0, got {given!r}")
        return float(given)
    if isinstance(fn, Variant):
        return None
    raw = os.environ.get("WORKBENCH_CASE_TIME_LIMIT", "").strip()
    if not raw:
        return DEFAULT_TIME_LIMIT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise ValueError(f"WORKBENCH_CASE_TIME_LIMIT must be a number of seconds > 0, got {raw!r}")
    return value


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CaseTimeout` into the block when it runs longer than ``seconds`` (None: no limit).

    In the main thread a SIGALRM timer does it, which also ends a ``time.sleep`` or a blocking wait; elsewhere a
    watchdog thread raises it asynchronously (``PyThreadState_SetAsyncExc``), which takes effect at the next Python
    bytecode. Neither can stop C code that never returns to Python (one long torch or numpy call, a compiled CUDA C
    kernel in the CPU engine: that one has its own WORKBENCH_CUDA_TIME_LIMIT), and threads the call started (the
    Numba simulator's) run on to their end.
    """
    if seconds is None:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        with _alarm(seconds):
            yield
    else:
        with _watchdog(seconds):
            yield


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise CaseTimeout(seconds)

    start = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, ring)
    old_left, old_every = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_left:  # an outer timer (pytest-timeout, ...) keeps what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, old_left - (time.monotonic() - start)), old_every)


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    tid = threading.get_ident()
    lock, state = threading.Lock(), {"done": False, "fired": False}
    stop = threading.Event()

    def watch() -> None:
        if stop.wait(seconds):
            return
        with lock:
            if not state["done"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(CaseTimeout))

    dog = threading.Thread(target=watch, name="wb-check-watchdog", daemon=True)
    dog.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        stop.set()
        dog.join()
        if state["fired"]:  # not yet delivered (the call ended in C code): clear it and raise it here
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None)
    if state["fired"]:
        raise CaseTimeout(seconds)


def _trusted() -> list[tuple[object, dict[str, object], bool]]:
    """Return what the checker's verdict depends on, with its contents now: this module, its report classes and
    the torch functions and Tensor methods its comparison calls."""
    names = ("isfinite", "isnan", "isinf", "where", "zeros_like", "equal", "argmax", "tensor", "as_tensor",
             "full_like", "empty", "zeros")
    return [(globals(), dict(globals()), True), (CheckReport, dict(vars(CheckReport)), True),
            (CaseResult, dict(vars(CaseResult)), True), (torch.Tensor, dict(vars(torch.Tensor)), True),
            (torch, {n: getattr(torch, n) for n in names}, False)]


def _restore_checker(was: list[tuple[object, dict[str, object], bool]]) -> list[str]:
    """Put back anything of :func:`_trusted` replaced, added or removed since the snapshot ``was``; return its names."""
    changed = []
    for owner, before, whole in was:
        now = owner if isinstance(owner, dict) else vars(owner)
        label = "" if isinstance(owner, dict) else f"{getattr(owner, '__name__', owner)}."
        for k in [k for k in now if k not in before] if whole else []:
            changed.append(label + k)
            if isinstance(owner, dict):
                del owner[k]
            else:
                delattr(owner, k)
        for k, v in before.items():
            if now.get(k, _MISSING) is not v:
                changed.append(label + k)
                if isinstance(owner, dict):
                    owner[k] = v
                else:
                    setattr(owner, k, v)
    return changed


_MISSING = object()


def _run_case(fn: Callable, spec: Op, shape: dict, dt: torch.dtype, seed: int, case: str,
              baseline: Variant | None, limit: float | None = None) -> CaseResult:
    from workbench._sanitize import sanitizing

    sizes, kw = spec.split(shape)
    res = CaseResult(shape=dict(shape), dtype=dtype_name(dt), seed=seed, case=case, ok=False)
    inputs = make_inputs(spec.name, dtype=dt, seed=seed, case=case, **shape)
    ref = spec.reference(*inputs, **kw)
    touts = None
    if dt in (torch.float16, torch.bfloat16) and baseline is not None and fn is not baseline:
        # flash-attention's rule: up to 2x the error torch itself makes at this dtype (per output), on the
        # pristine inputs (before the kernel runs: a kernel that mutates its inputs must not widen its tolerance).
        t = baseline.fn(*inputs, **kw)
        touts = list(t) if isinstance(t, (tuple, list)) else [t]
    before = [_bits(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    tampered: list[str] = []
    trusted = _trusted()  # taken before the call: what the call changes is put back before its output is judged
    try:
        with _time_limit(limit), poisoning(), sanitizing(), _quiet_floating_point():
            out = fn(*inputs, **kw)
    except (OpError, UnsupportedHere, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001  (SystemExit included: the user's kernel failed, report it)
        return _failed_call(res, e, limit)
    finally:
        tampered = _restore_checker(trusted)
    if tampered:
        res.diagnosis, res.detail = "tampered", (f"the call replaced {', '.join(sorted(set(tampered))[:5])} of the "
                                                 "checker while it ran; restored, and this run fails")
        return res
    mutated = _mutated(spec, inputs, before)
    if mutated:
        res.diagnosis, res.detail = "mutated_input", mutated
        return res
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    outs = _outputs(res, spec, out, refs, inputs, dt)
    if outs is None:
        return res
    if spec.canonical is not None:  # an order the contract leaves free is put in canonical form first
        outs = list(spec.canonical(outs, refs, *inputs, **kw))
    _compare_outputs(res, spec, shape, dt, outs, refs, touts)
    if not res.ok:
        key = _recomputed_diagnosis(spec, res, outs, refs, inputs, shape, dt)
        if key is not None:
            res.diagnosis = key
    return res


def _recomputed_diagnosis(spec: Op, res: CaseResult, outs: list[torch.Tensor], refs: list[torch.Tensor],
                          inputs: tuple, shape: dict, dt: torch.dtype) -> str | None:
    """Name a classic mistake by recomputing it: the op's own (``Op.explain``), else a GEMM's dropped K tail."""
    atol, rtol = spec.tolerance(dt, shape) if spec.tolerance else (1e-5, 1e-5)
    atol = max(atol, 2 * (res.torch_err or 0.0))
    outs = [o.detach().double().cpu() for o in outs]
    refs = [r.double().cpu() for r in refs]
    inputs = tuple(t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in inputs)
    sizes, kw = spec.split(shape)
    if spec.explain is not None:  # the op names a classic mistake it recognises in these outputs
        key = spec.explain(outs, refs, inputs, kw, atol, rtol)
        if key is not None:
            return key
    return _k_tail(spec, outs, inputs, sizes, kw, atol, rtol)


def contraction_axes(spec: Op, dim: str = "K") -> list[list[int]]:
    """Return, per input of ``spec``'s signature, the axes named ``dim``; [] unless the outputs lack ``dim``.

    ``gemm(a[M,K], b[K,N]) -> [M,N]`` gives ``[[1], [0]]`` for K: the dimension the op sums over.
    """
    args, _, result = spec.signature.partition("->")
    out_dims = {d.strip() for group in re.findall(r"\[([^\]]*)\]", result) for d in group.split(",")}
    axes = []
    for arg in _signature_args(args):
        m = re.search(r"\[([^\]]*)\]", arg)
        dims = [d.strip() for d in m.group(1).split(",")] if m and "=" not in arg else []
        axes.append([i for i, d in enumerate(dims) if d == dim])
    if dim in out_dims or not any(axes):
        return []
    return axes


def k_tail_lengths(k: int) -> list[int]:
    """Return the K lengths a K loop over whole power-of-two tiles keeps (at least one whole tile, a tail dropped)."""
    kept, t = set(), 2
    while t < k:
        if k % t:
            kept.add(k - k % t)
        t *= 2
    return sorted(kept, reverse=True)


def _k_tail(spec: Op, outs: list[torch.Tensor], inputs: tuple, sizes: dict, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'k_tail' when the outputs equal the reference computed without the last partial K tile."""
    axes = contraction_axes(spec)
    k = sizes.get("K")
    if not axes or not isinstance(k, int) or len(axes) > len(inputs):
        return None
    for kept in k_tail_lengths(k):
        cut = []
        for t, ax in zip(inputs, axes + [[]] * (len(inputs) - len(axes)), strict=True):
            if ax and isinstance(t, torch.Tensor):
                t = t.clone()
                for a in ax:
                    t.narrow(a, kept, k - kept).zero_()
            cut.append(t)
        alt = spec.reference(*cut, **kw)
        alts = [r.double().cpu() for r in (alt if isinstance(alt, (tuple, list)) else [alt])]
        if all(close_to(o, r, atol, rtol) for o, r in zip(outs, alts, strict=True)):
            return "k_tail"
    return None


def _outputs(res: CaseResult, spec: Op, out: object, refs: list[torch.Tensor], inputs: tuple, dt: torch.dtype
             ) -> list[torch.Tensor] | None:
    """Return the call's outputs as a list, or None after filling ``res`` as bad_output (type, shape, dtype...)."""
    from workbench import device as _device

    names = spec.outputs or ("out",)
    if len(names) > 1:  # a multi-output op (attention_bwd -> dq, dk, dv) returns a tuple in the contract's order
        if not isinstance(out, (tuple, list)) or len(out) != len(names):
            res.diagnosis, res.detail = "bad_output", (
                f"returned {type(out).__name__}, expected a tuple of {len(names)} tensors ({', '.join(names)})")
            return None
        outs = list(out)
    else:
        outs = [out]
    out_dts = spec.out_dtypes(dt) if spec.out_dtypes is not None else (dt,) * len(names)
    for nm, o_i, r_i, want in zip(names, outs, refs, out_dts, strict=True):
        what = f"{nm} " if len(names) > 1 else ""
        if not isinstance(o_i, torch.Tensor):
            why = f"returned {type(o_i).__name__}{f' for {nm}' if len(names) > 1 else ''}, expected a torch.Tensor"
        elif type(o_i) is not torch.Tensor:  # a subclass can override comparison and arithmetic: refused, not judged
            why = (f"returned {what}a {type(o_i).__module__}.{type(o_i).__qualname__}, a torch.Tensor subclass; "
                   "return a plain torch.Tensor")
        elif o_i.layout != torch.strided or o_i.is_meta:
            why = f"returned {what}a {o_i.layout} {'meta ' if o_i.is_meta else ''}tensor, expected a plain dense one"
        elif tuple(o_i.shape) != tuple(r_i.shape):
            why = f"returned {what}shape {tuple(o_i.shape)}, expected {tuple(r_i.shape)}"
        elif o_i.dtype != want:
            why = f"returned {what}dtype {dtype_name(o_i.dtype)}, expected {dtype_name(want)}"
        elif o_i.device.type != _device().type:
            why = f"returned {what}a tensor on {o_i.device}, expected {_device()}"
        else:
            continue
        res.diagnosis, res.detail = "bad_output", why
        return None
    return outs


def _compare_outputs(res: CaseResult, spec: Op, shape: dict, dt: torch.dtype, outs: list[torch.Tensor],
                     refs: list[torch.Tensor], touts: list[torch.Tensor] | None) -> None:
    """Compare each output with its reference into ``res``: counts, the worst element, the diagnosis."""
    names = spec.outputs or ("out",)
    atol0, rtol = spec.tolerance(dt, shape) if spec.tolerance else (1e-5, 1e-5)
    if touts is not None:
        res.torch_err = 0.0
    res.n_elements = res.n_mismatch = 0
    res.ok = True
    for i, (nm, o_i, r_i) in enumerate(zip(names, outs, refs, strict=True)):
        atol = atol0
        if touts is not None:
            fin = torch.isfinite(r_i.cpu())
            terr = (touts[i].double().cpu() - r_i.cpu()).abs()[fin]
            t_err = float(terr.max()) if terr.numel() else 0.0
            res.torch_err = max(res.torch_err, t_err)
            atol = max(atol, 2 * t_err)
        bad, tol = _compare(o_i, r_i, atol, rtol)
        o, r = o_i.double().cpu(), r_i.double().cpu()
        err = (o - r).abs().nan_to_num(nan=math.inf)
        err = torch.where(torch.isfinite(r), err, torch.where(bad, math.inf, 0.0))
        res.n_elements += r.numel()
        n_bad = int(bad.sum())
        res.n_mismatch += n_bad
        res.max_abs_err = max(res.max_abs_err, float(err.max()) if err.numel() else 0.0)
        if n_bad:
            res.wrong_outputs.append(nm)
        if n_bad and res.ok:  # the first wrong output names the worst element and the diagnosis
            res.ok = False
            idx = bad.nonzero()
            res.first_indices = [tuple(int(j) for j in row) for row in idx[:8]]
            excess = torch.where(bad, err - tol, torch.tensor(-math.inf, dtype=err.dtype))
            w = _unravel(int(torch.argmax(excess)), r.shape)
            res.worst = {"index": w, "got": _fmt(float(o[w])), "expected": _fmt(float(r[w])),
                         "abs_err": float(err[w]), "tol": float(tol[w])}
            if len(names) > 1:
                res.worst["output"] = nm
            res.diagnosis = diagnose(o, r, bad, tol.double().cpu(), is_poison(o_i).cpu())

