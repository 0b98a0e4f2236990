"""Spot-the-bug drills: a known-wrong kernel's source without its telltale comments; answer with the bug's line(s).

One drill per registered known-wrong kernel. The listing comes from the kernel's real file(s) through the
transformations of :mod:`workbench.practice.listing`; the answer key is derived, not typed: the lines of the
listing that change when the drill's ``fix`` is applied to the file. ``verify(drill)`` runs both versions of the
file (as it is, and fixed) through the checker, which is how the tests prove that the lines that change are the
bug: the file as it is fails with the kernel's declared diagnosis, the fixed file passes. Blank lines, braces and
whitespace-only changes are never in the key (:func:`workbench.practice.listing.answer_key`): a lone ``}`` fails.

After a guess the feedback shows what the code does under the checker (the shapes that pass and fail, a few wrong
elements with what was expected, the diagnosis in words, a sanitizer's finding) with the listing's line numbers and
names, never the known-wrong kernel's registered name or file. The optional label is judged by the mistake it
names, not by one word: :data:`MISTAKES` maps plain words ("tail", "bounds", "syncthreads", "overflow") to
mistakes, and a label passes when everything it names is this kernel's mistake (or it is the checker's own word for
one of the kernel's failing runs).
"""

from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.practice import listing as L
from workbench.practice.base import Drill, Grade

_REPORTS: dict[str, Any] = {}  # the checker's report of each known-wrong kernel, once per session
_SAMPLES: dict[str, list[tuple[str, str, str]]] = {}  # a few wrong elements of a report's telling run
_TMP: list[Path] = []

# ------------------------------------------------------------------------------------------------ mistakes
# Each mistake a spot-the-bug kernel can make, with the plain words that name it. A word may name several
# (``mask``: a tail mask or the causal mask); a label passes when every word it uses names the kernel's mistake.
MISTAKES: dict[str, tuple[str, ...]] = {
    "bounds": ("bounds", "bound", "out of bounds", "oob", "bounds check", "boundary", "tail", "k tail", "tails",
               "remainder", "partial tile", "last tile", "ragged", "edge", "masking", "mask", "missing mask",
               "off by one", "guard", "missing guard", "unguarded", "grid", "grid size", "ceil", "floor",
               "round up", "rounding up", "unwritten rows", "dropped rows", "loop bound", "k loop", "unmasked",
               "no mask", "no bounds check", "missing bounds check", "integer division", "too few blocks"),
    "race": ("race", "races", "data race", "race condition", "hazard", "racecheck", "raw hazard", "war hazard",
             "waw hazard"),
    "barrier": ("barrier", "missing barrier", "syncthreads", "sync threads", "sync", "missing sync",
                "synchronization", "synchronisation", "synchronize"),
    "atomic": ("atomic", "atomics", "atomic add", "missing atomic", "non atomic", "write conflict",
               "conflicting stores", "duplicate stores"),
    "uninitialized": ("uninitialized", "uninitialised", "initcheck", "uninitialized read", "uninitialized memory",
                      "garbage", "stale"),
    "unwritten": ("unwritten", "never written", "missing store", "skipped store"),
    "divergent": ("divergent barrier", "divergence", "divergent"),
    "precision": ("precision", "low precision", "reduced precision", "accumulator", "accumulation", "accumulate",
                  "fp16 accumulator", "fp16 accumulation", "fp32 accumulation", "rounding", "numerics"),
    "overflow": ("overflow", "computed nan", "nan", "inf", "numerical stability", "stability", "unstable",
                 "max subtraction", "subtract max", "subtract the max", "exp overflow", "missing max", "no max"),
    "special": ("special values", "special value", "nan", "inf", "empty row", "empty rows", "all inf",
                "masked row", "fully masked"),
    "scale": ("scale", "scaling", "factor", "wrong scale"),
    "normalizer": ("normalizer", "normalization", "normalisation", "mean", "divisor", "reduction", "wrong axis",
                   "wrong dimension", "wrong dim", "sum", "axis", "unbiased", "unbiased variance", "bessel",
                   "variance"),
    "rescale": ("online rescale", "rescale", "rescaling", "missing rescale", "correction factor", "running max",
                "online softmax"),
    "causal": ("causal", "causal mask", "causal diagonal", "diagonal", "mask", "masking", "off by one"),
    "activation": ("swiglu", "silu", "activation", "gate"),
    "mutated": ("mutated input", "in place", "inplace", "input mutation", "mutates input", "overwrites input",
                "writes input", "writes x", "writes into x", "writes the input", "overwrite", "overwrites",
                "aliasing", "wrong output buffer"),
    "gradient": ("delta", "missing delta", "softmax backward", "softmax gradient", "gradient", "backward",
                 "formula", "missing term", "rowsum"),
    "padding": ("padding", "pad", "unpadded", "round up", "rounding up", "ceil", "alignment", "align",
                "block multiple"),
    "ties": ("tie", "ties", "tie break", "tiebreak", "tie breaking", "lowest index", "highest index",
             "smallest index", "largest index", "argmax", "stable order"),
    "quantization": ("quantization", "quantisation", "quantize", "quantise", "requant", "requantize",
                     "requantization", "skipped requant", "fp8", "rounding"),
    "block_scale": ("block scale", "block scales", "scale index", "scale row", "wrong scale", "scale",
                    "scales", "indexing", "index"),
    "head_map": ("gqa", "gqa mapping", "head mapping", "head map", "kv head", "kv head index", "head index",
                 "query group", "group mapping", "grouping", "modulo", "indexing", "index"),
    "convention": ("rope convention", "convention", "wrong convention", "swapped convention", "neox", "gpt neox",
                   "gpt j", "gptj", "rotate half", "interleaved", "pairing", "pairs", "pair index", "partner"),
    "packing": ("packing", "nibble", "nibbles", "nibble order", "swapped nibbles", "byte order", "unpacking",
                "unpack", "low nibble", "high nibble", "decode", "decoding", "e2m1 decode"),
    "eps": ("eps", "epsilon", "eps outside the sqrt", "eps outside sqrt", "eps placement", "sqrt", "square root"),
    "deadlock": ("deadlock", "dead lock", "hang", "hangs", "blocking send", "send order", "sends first",
                 "send before receive", "send before recv", "circular wait", "rendezvous", "post the receive first"),
    "wait": ("missing wait", "wait", "no wait", "read before wait", "early read", "async", "asynchronous",
             "async handle", "stale", "stale read", "reused buffer", "buffer reuse", "reuse", "reused",
             "in flight", "send buffer", "receive buffer", "recv buffer", "irecv", "isend"),
    "chunk_index": ("chunk index", "wrong chunk", "off by one", "ring index", "ring indices", "index",
                    "indexing", "partial sum", "partial sums", "ring step", "chunk", "own chunk"),
    "collective": ("missing all-reduce", "missing all reduce", "no all-reduce", "no all reduce", "all-reduce",
                   "all reduce", "allreduce", "missing collective", "collective", "partial sum", "partial sums",
                   "missing reduction", "missing sum", "communication", "missing communication"),
}
# The mistake each checker diagnosis names (``scattered`` names none: it only says no pattern was found).
DIAGNOSIS_MISTAKES: dict[str, tuple[str, ...]] = {
    "masking": ("bounds",), "out_of_bounds": ("bounds",), "k_tail": ("bounds",), "unwritten_rows": ("bounds",),
    "unwritten": ("unwritten",), "race": ("race",), "missing_barrier": ("race", "barrier"),
    "divergent_barrier": ("divergent",), "uninitialized": ("uninitialized",), "precision": ("precision",),
    "computed_nan": ("overflow",), "special_values": ("special",), "scale": ("scale",),
    "normalizer": ("normalizer",), "online_rescale": ("rescale",), "causal_diagonal": ("causal",),
    "swiglu": ("activation",), "mutated_input": ("mutated",), "scattered": (), "rope_convention": ("convention",),
    "deadlock": ("deadlock",), "missing_wait": ("wait",), "partial_sum": ("chunk_index",),
    "wrong_chunk": ("chunk_index",),
}
# Kernels whose mistake is not (only) what their diagnosis names: the checker's word is a pattern, the mistake is
# the line (a race needs an atomic, not a barrier; a scattered result comes from a missing term).
KERNEL_MISTAKES: dict[str, tuple[str, ...]] = {
    "gemm/wrong_missing_syncthreads": ("race", "barrier"),
    "gemm/wrong_k_tail": ("bounds",),
    "moe/wrong_combine_store": ("race", "atomic"),
    "attention_bwd/wrong_no_delta": ("gradient",),
    "moe_align/wrong_unpadded": ("padding",),
    "moe_topk/wrong_ties_high_id": ("ties",),
    "gemm_fp8/wrong_fp16_accumulator": ("precision", "overflow"),
    "moe_fp8/wrong_bf16_intermediate": ("quantization",),
    "moe_fp8/wrong_up_scale_row": ("block_scale",),
    "gemm_fp8_block/wrong_scale_first_group": ("block_scale",),
    "rmsnorm/wrong_mean_over_rows": ("scale", "normalizer"),
    "add_rmsnorm/wrong_eps_outside_sqrt": ("eps", "normalizer"),
    "softmax/wrong_unguarded_warp_slots": ("uninitialized", "bounds"),
    "decode_attention/wrong_gqa_head_mod": ("head_map",),
    "decode_attention/wrong_reads_past_seq_len": ("bounds",),
    "layernorm/wrong_eps_outside_sqrt": ("eps", "overflow"),
    "layernorm/wrong_unbiased_variance": ("normalizer", "scale"),
    "layernorm_bwd/wrong_sum_over_n": ("normalizer", "gradient"),
    "gemm_w8a8/wrong_scale_first": ("precision", "scale"),
    "gemm_mxfp4/wrong_b_nibble_order": ("packing",),
    "tp_mlp/wrong_no_all_reduce": ("collective",),
    "all_gather/wrong_own_piece_missing": ("unwritten",),
}


def _words(label: str) -> str:
    """Return ``label`` lower-cased, with ``_ - / ( ) .`` as spaces and runs of spaces squeezed."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", label.lower()).split())


@functools.cache
def _phrase_table() -> tuple[dict[str, frozenset[str]], re.Pattern]:
    """Return {phrase: the mistakes it names} and the pattern matching any phrase, longest first (built once).

    A checker word that is not a plain phrase names its diagnosis's mistakes. MISTAKES and DIAGNOSIS_MISTAKES are
    constant tables: labels are graded thousands of times in a test run, and rebuilding this took most of it.
    """
    out: dict[str, set[str]] = {}
    for mistake, words in MISTAKES.items():
        for w in words:
            out.setdefault(_words(w), set()).add(mistake)
    for diagnosis, mistakes in DIAGNOSIS_MISTAKES.items():  # "missing barrier" stays a barrier, not any race
        out.setdefault(_words(diagnosis), set(mistakes))
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in sorted(out, key=len, reverse=True)) + r")\b")
    return {k: frozenset(v) for k, v in out.items()}, pattern


def named_mistakes(label: str) -> list[frozenset[str]]:
    """Return the mistakes each phrase of ``label`` names, longest phrases first (``[]``: it names none we know)."""
    phrases, pattern = _phrase_table()
    return [phrases[m.group(0)] for m in pattern.finditer(_words(label))]


def _is_known_label(label: str) -> bool:
    from workbench.checker import DIAGNOSES

    return label in DIAGNOSES or bool(named_mistakes(label))


@dataclass(frozen=True)
class BugAnswer:
    """A spot-the-bug answer: the line number(s) of the bug and, optionally, the checker's diagnosis."""

    lines: tuple[int, ...]
    diagnosis: str | None = None

    def __init__(self, lines: int | list[int] | tuple[int, ...], diagnosis: str | None = None) -> None:
        object.__setattr__(self, "lines", _as_lines(lines))
        object.__setattr__(self, "diagnosis", None if diagnosis is None else str(diagnosis).strip().lower())


def _as_lines(lines: Any) -> tuple[int, ...]:
    if isinstance(lines, bool):
        raise TypeError(f"spot-the-bug: a line number is an int, got {lines!r}")
    if isinstance(lines, int):
        return (lines,)
    if isinstance(lines, (list, tuple, set, frozenset)) and lines and all(
            isinstance(n, int) and not isinstance(n, bool) for n in lines):
        return tuple(sorted(set(lines)))
    raise TypeError(f"spot-the-bug: answer with a line number or a list of line numbers, got {lines!r}")


@dataclass(frozen=True)
class Fix:
    """One replacement in the kernel's Python file (``file="py"``) or its CUDA C file (``file="cu"``)."""

    old: str
    new: str
    file: str = "py"


@dataclass(eq=False, repr=False)
class SpotTheBugDrill(Drill):
    """Find the bug in a known-wrong kernel: ``d.submit(7)``, ``d.submit([7, 9])`` or with a ``BugAnswer``."""

    variant: str = ""
    show_items: tuple[str, ...] = ()
    renames: dict[str, str] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)
    edits: tuple[tuple[str, str, str], ...] = ()  # (file, old, new)
    fixes: tuple[Fix, ...] = ()
    context: str = ""  # markdown: what the code is for and how it is launched
    why: str = ""  # markdown: the explanation shown with the answer
    check_shapes: tuple[dict, ...] | None = None  # the shapes of the feedback's checker run (default: the op's)
    witness: dict | None = None  # the cheapest shape where the kernel fails with its diagnosis (for the tests)
    correct: dict[str, str] = field(default_factory=dict)  # shown name -> "module:function" of a correct kernel

    # -------------------------------------------------------------- the listing
    @property
    def kernel(self) -> Any:
        """Return the registered known-wrong variant this drill shows."""
        import workbench as wb

        return wb.variant(self.op, self.variant)

    def _texts(self, fixed: bool, for_listing: bool) -> dict[str, str]:
        v = self.kernel
        texts = {"py": L.read(Path(v.source))}
        if v.cu_file is not None:
            texts["cu"] = L.read(Path(v.cu_file))
        where = f"drill {self.id}"
        if fixed:
            for f in self.fixes:
                if f.file not in texts:
                    raise L.ListingError(f"{where}: fix for file {f.file!r}, but {v.op}/{v.name} has no such file")
                texts[f.file] = L.apply_fixes(texts[f.file], [(f.old, f.new)], f"{where} ({f.file})")
        texts["py"] = L.drop_register_decorators(texts["py"], where)
        if not for_listing:
            return texts
        texts["py"] = L.resolve(texts["py"], self.consts, where)
        for file, old, new in self.edits:
            texts[file] = L.apply_edits(texts[file], [(old, new)], f"{where} ({file})")
        for item in self.show_items:
            path, _ = _split_item(item)
            if path not in ("py", "cu") and path not in texts:
                texts[path] = L.drop_register_decorators(L.read(Path(v.source).parent / path), where) \
                    if path.endswith(".py") else L.read(Path(v.source).parent / path)
        return L.apply_renames(texts, self.renames, where)

    def _blocks(self, fixed: bool) -> list[tuple[str, L.Part]]:
        """Return each shown item with its own part (before parts of one caption are merged)."""
        texts = self._texts(fixed, for_listing=True)
        out = []
        for item in self.show_items:
            path, name = _split_item(item)
            name = self.renames.get(name, name)
            text = texts[path]
            if _is_c(path):
                lines = L.strip_c(L.extract_c(text, name, f"drill {self.id}"))
                out.append((item, L.Part("CUDA C", "cuda", tuple(lines))))
            else:
                src = L.extract_python(text, name, f"drill {self.id}")
                caption = ("Triton kernel" if "@triton.jit" in src else "Numba CUDA kernel" if "@cuda.jit" in src
                           else "Python")
                out.append((item, L.Part(caption, "python", tuple(L.strip_python(src)))))
        return out

    def listing(self, fixed: bool = False) -> L.Listing:
        """Return the numbered listing the learner sees (``fixed=True``: the same listing with the fix applied)."""
        return L.Listing(_merge_parts([p for _, p in self._blocks(fixed)]))

    def key(self) -> list[int]:
        """Return the answer key: the listing lines that must change for the fix (never a blank or brace line)."""
        key = L.answer_key(self.listing().lines, self.listing(fixed=True).lines)
        if not key:
            raise L.ListingError(f"drill {self.id}: the fix changes no line of the listing that is more than a brace")
        return key

    def mistakes(self) -> set[str]:
        """Return the mistakes (keys of :data:`MISTAKES`) this drill's kernel makes."""
        v = self.kernel
        named = KERNEL_MISTAKES.get(f"{v.op}/{v.name}") or DIAGNOSIS_MISTAKES.get(v.expected_diagnosis or "", ())
        if not named:
            raise L.ListingError(f"drill {self.id}: {v.op}/{v.name}'s diagnosis {v.expected_diagnosis!r} names no "
                                 "mistake: add the kernel to workbench.practice.spot.KERNEL_MISTAKES")
        return set(named)

    def label_ok(self, label: str, checker_words: set[str] | None = None) -> bool:
        """Return True when ``label`` names this kernel's mistake, or is the checker's word for one of its runs.

        Every phrase of the label must name the mistake (``"race"`` passes a barrier race, ``"race or a tail"``
        does not); ``checker_words`` are the diagnoses the checker gives the kernel's failing runs (default: its
        declared one).
        """
        words = checker_words if checker_words is not None else {self.kernel.expected_diagnosis}
        if label.strip().lower() in words or _words(label) in {_words(w) for w in words if w}:
            return True
        found = named_mistakes(label)
        mine = self.mistakes()
        return bool(found) and all(m & mine for m in found)

    # -------------------------------------------------------------- the drill
    def statement(self) -> str:
        import workbench as wb

        op = wb.get_op(self.op)
        return (f"{self.context}\n\nThe contract: `{op.signature}`. One thing in this code is wrong; the rest is "
                f"right. Which line(s)?\n\n{self.listing().markdown()}")

    def answer_format(self) -> str:
        return ("the line number(s) of the bug: `d.submit(12)` or `d.submit([12, 14])`; name the mistake too with "
                "`d.submit(BugAnswer(12, 'tail'))`: in plain words (a tail, a race, a missing barrier, an overflow, "
                "...) or as the checker's diagnosis (`wb.checker.DIAGNOSES`).")

    def checker_report(self) -> Any:
        """Return what the checker reports for this kernel (first dtype, one seed; run once per session)."""
        import workbench as wb

        key = self._report_key()
        if key not in _REPORTS:
            v = self.kernel
            shapes = list(self.check_shapes) if self.check_shapes else None
            _REPORTS[key] = wb.check(v, shapes=shapes, dtypes=v.dtypes[:1], quick=True)
        return _REPORTS[key]

    def _report_key(self) -> str:
        shapes = list(self.check_shapes) if self.check_shapes else None
        return json.dumps([self.op, self.variant, shapes], sort_keys=True, default=str)

    def _grade(self, answer: Any) -> Grade:
        ans = _as_answer(answer)
        if ans.diagnosis is not None and not _is_known_label(ans.diagnosis):
            raise ValueError(f"drill {self.id}: diagnosis {ans.diagnosis!r} names no mistake the drills know and is "
                             "not one of the checker's diagnoses: name it in plain words (a tail, a race, a missing "
                             "barrier, an overflow, precision, ...) or use a key of wb.checker.DIAGNOSES")
        lst = self.listing()
        n = len(lst.lines)
        summary = f"lines {list(ans.lines)}" + (f", diagnosis {ans.diagnosis}" if ans.diagnosis else "")
        outside = [x for x in ans.lines if not 1 <= x <= n]
        if outside:
            return Grade(False, f"The listing has lines 1..{n}; {outside} is outside it.", summary)
        named = [x for x in ans.lines if not L.is_trivial(lst.line(x))]
        if not named:
            shown = ", ".join(f"{x} (`{lst.line(x).strip() or 'blank'}`)" for x in ans.lines)
            return Grade(False, f"Line{'s' if len(ans.lines) > 1 else ''} {shown}: a blank line or a brace is never "
                                "the bug. Name the line(s) of code that must change.", summary)
        key = set(self.key())
        report = self.checker_report()
        wrong_lines = [x for x in named if x not in key]
        diag_ok = ans.diagnosis is None or self.label_ok(ans.diagnosis, self.checker_words(report))
        behaviour = self.behaviour(report)
        if not wrong_lines and diag_ok:
            fb = [f"Right: the bug is on line{'s' if len(key) > 1 else ''} {sorted(key)}."]
            if ans.diagnosis:
                fb.append(f"And `{ans.diagnosis}` names its mistake.")
            fb += [self.why, behaviour, "The fix:\n\n" + _diff(lst, self.listing(fixed=True))]
            return Grade(True, "\n\n".join(fb), summary)
        if wrong_lines:
            listed = ", ".join(map(str, wrong_lines))
            fb = [f"Not quite: line{'s' if len(wrong_lines) > 1 else ''} {listed} "
                  f"{'are' if len(wrong_lines) > 1 else 'is'} fine as written."]
        else:
            fb = ["The lines are right."]
        if not diag_ok:
            fb.append(f"But `{ans.diagnosis}` does not name this kernel's mistake (see what it does below).")
        fb += [behaviour, "Stuck? `d.hint()`; `d.reveal()` shows the answer (recorded as a reveal)."]
        return Grade(False, "\n\n".join(fb), summary)

    def checker_words(self, report: Any) -> set[str]:
        """Return the kernel's declared diagnosis and the diagnoses of the report's failing runs."""
        return {self.kernel.expected_diagnosis or ""} | {c.diagnosis for c in report.runs if not c.ok and c.diagnosis}

    def model_answer(self) -> BugAnswer:
        return BugAnswer(self.key(), self.kernel.expected_diagnosis)

    def explanation(self) -> str:
        lst = self.listing()
        key = self.key()
        shown = "\n".join(f"{k}: {lst.line(k).strip()}" for k in key)
        return (f"Line(s) {key}:\n\n```\n{shown}\n```\n\n{self.why}\n\nThe checker says `"
                f"{self.kernel.expected_diagnosis}`. The fix:\n\n{_diff(lst, self.listing(fixed=True))}")

    # -------------------------------------------------------------- what the code does, in the listing's terms
    def behaviour(self, report: Any) -> str:
        """Return markdown on what the kernel does under the checker, in the listing's names and line numbers.

        The runs that pass and fail by shape, then the telling run: a few wrong elements with what was expected,
        or the sanitizer's (or the exception's) finding, and the diagnosis in words. No registered name, no file.
        """
        from workbench.checker import DIAGNOSES

        fails = [c for c in report.cases if not c.ok] or [c for c in report.probes if not c.ok]
        if not fails:
            return "Under the checker, every run of this code passes (at the shapes it tried)."
        case = report.telling_failure
        out = [f"**What this code does under the checker:** {sum(not c.ok for c in report.runs)} of "
               f"{len(report.runs)} runs fail.\n\n" + _by_shape(report.cases)]
        where = _where(case)
        if case.worst is not None:
            out.append(f"On {where}: {case.n_mismatch} of {case.n_elements} output elements are wrong, e.g.\n\n"
                       + self._sample_table(case))
        else:
            detail = self.scrub(case.detail)
            lines = detail.splitlines()
            more = f"\n... ({len(lines) - 12} more lines)" if len(lines) > 12 else ""
            out.append(f"On {where} the run fails:\n\n```\n" + "\n".join(lines[:12]) + more + "\n```")
        out.append(f"What that means: {self.scrub(DIAGNOSES.get(case.diagnosis or '', ''))}")
        return "\n\n".join(out)

    def _sample_table(self, case: Any) -> str:
        """Return a markdown table of a few wrong elements of ``case``: got and expected."""
        key = json.dumps([self._report_key(), case.shape, case.dtype, case.seed, case.case], default=str)
        rows = _SAMPLES.get(key)
        if rows is None:
            try:
                rows = self._samples(case)
            except Exception:  # noqa: BLE001  (a rerun that fails still leaves the checker's worst element)
                rows = []
            if rows:
                _SAMPLES[key] = rows
            else:
                w = case.worst
                name = w.get("output", "out")
                rows = [(f"{name}[{', '.join(map(str, w['index']))}]", str(w["got"]), str(w["expected"]))]
        body = "\n".join(f"| `{i}` | {g} | {e} |" for i, g, e in rows)
        return "| element | got | expected |\n|---|---|---|\n" + body

    def _samples(self, case: Any, n: int = 4) -> list[tuple[str, str, str]]:
        """Run the kernel again on ``case``'s inputs; return (element, got, expected) of its first wrong elements."""
        import torch

        from workbench.checker import _fmt
        from workbench.registry import as_dtype, get_op, is_poison, make_inputs, poisoning

        spec = get_op(self.op)
        _, kw = spec.split(case.shape)
        dt = as_dtype(case.dtype)
        inputs = make_inputs(self.op, dtype=dt, seed=case.seed, case=case.case, **case.shape)
        ref = spec.reference(*inputs, **kw)
        with poisoning():
            got = self.kernel(*inputs, **kw)
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        outs = list(got) if isinstance(got, (tuple, list)) else [got]
        if spec.canonical is not None:
            outs = list(spec.canonical(outs, refs, *inputs, **kw))
        names = spec.outputs or ("out",)
        k = names.index(case.worst["output"]) if "output" in case.worst else 0
        o, r = outs[k].detach().cpu(), refs[k].detach().cpu()
        poison = is_poison(o)
        rows = []
        for idx in dict.fromkeys([tuple(case.worst["index"])] + [tuple(i) for i in case.first_indices]):
            if len(rows) == n:
                break
            g = "never written (poison)" if bool(poison[idx]) else _fmt(float(o[idx].to(torch.float64)))
            rows.append((f"{names[k]}[{', '.join(map(str, idx))}]", g, _fmt(float(r[idx].to(torch.float64)))))
        return rows

    def scrub(self, text: str) -> str:
        """Return a checker message in the listing's terms: its line numbers and names, no file or kernel name."""
        lines = self._line_map()

        def line(m: re.Match) -> str:
            shown = lines.get((m.group("base"), int(m.group("line"))))
            return f"line {shown}" if shown else "a line outside the listing"

        text = _FILE_LINE.sub(line, text)
        for old, new in self.renames.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        text = _FILE.sub("the kernel's source", text)
        return _wrong_names().sub(self.op, text)

    def _line_map(self) -> dict[tuple[str, int], int]:
        """Return {(file name, line in that file): listing line} for the lines of the real files that are shown."""
        key = f"map:{self.id}"
        if key not in _LINE_MAPS:
            _LINE_MAPS[key] = self._build_line_map()
        return _LINE_MAPS[key]

    def _build_line_map(self) -> dict[tuple[str, int], int]:
        v = self.kernel
        files = {"py": Path(v.source)}
        if v.cu_file is not None:
            files["cu"] = Path(v.cu_file)
        out: dict[tuple[str, int], int] = {}
        start = 0  # where the item's lines begin in the listing (0-based)
        prev_caption = None
        for item, part in self._blocks(False):
            path, name = _split_item(item)
            if prev_caption == part.caption:
                start += 1  # the blank line _merge_parts puts between two parts of one caption
            file = files.get(path) or Path(v.source).parent / path
            raw = L.read(file)
            first, last = L.item_lines(raw, name, _is_c(path), f"drill {self.id}")
            region = raw.splitlines()[first - 1:last]
            text = "\n".join(region)
            text = L.blank_c_comments(text) if _is_c(path) else L.blank_python_comments(text)
            for old, new in self.renames.items():
                text = re.sub(rf"\b{re.escape(old)}\b", new, text)
            for i, j in L.map_lines(text.split("\n"), part.lines).items():
                out[(file.name, first + i)] = start + j + 1
            start += len(part.lines)
            prev_caption = part.caption
        return out

    # -------------------------------------------------------------- the correct kernel it derives from
    def counterpart_mismatches(self) -> list[str]:
        """Return the shown names whose fixed listing is not the correct kernel named in ``correct``.

        Compared as syntax trees (comments, docstrings, formatting and the function's own name do not count), so
        an empty list means: with the fix applied, the shown code *is* that correct kernel, and the answer key is
        exactly the lines where the known-wrong kernel departs from it.
        """
        import importlib

        texts = self._texts(True, for_listing=True)
        bad = []
        for shown, target in self.correct.items():
            mod_name, func = target.split(":", 1)
            mod = importlib.import_module(mod_name)
            theirs = L.extract_python(L.read(Path(mod.__file__)), func, target)
            ours = L.extract_python(texts["py"], shown, f"drill {self.id}")
            if _normalized(ours) != _normalized(theirs):
                bad.append(f"{shown} != {target}")
        return bad

    # -------------------------------------------------------------- running both versions
    def materialize(self, fixed: bool) -> Callable:
        """Return the kernel's host function, run from a copy of its file(s) as they are or with the fix applied.

        The copy (the ``@register`` decorators dropped, nothing else changed) lives in a temporary folder with the
        CUDA C file at the same relative path, so the module finds it as the original does; a relative import in it
        (``from .v6_triton_split import ...``) resolves in the kernel's own package, whose other files the fix leaves
        alone.
        """
        v = self.kernel
        texts = self._texts(fixed, for_listing=False)
        tmp = Path(tempfile.mkdtemp(prefix=f"wb-spot-{self.id}-"))
        _TMP.append(tmp)
        src = Path(v.source)
        opdir = tmp / src.parent.name  # tmp mirrors kernels/: the op's folder, and the headers its .cu includes
        opdir.mkdir()
        py = opdir / src.name
        py.write_text(texts["py"])
        if v.cu_file is not None:
            _copy_cuda(Path(v.cu_file), texts["cu"], src.parent, tmp)
        ns: dict[str, Any] = {"__name__": f"workbench_spot_{self.id.replace('-', '_')}_{int(fixed)}",
                              "__file__": str(py), "__package__": v.fn.__module__.rpartition(".")[0]}
        exec(compile(texts["py"], str(py), "exec"), ns)  # noqa: S102  (the project's own kernel file)
        return ns[v.fn.__name__]


_LINE_MAPS: dict[str, dict[tuple[str, int], int]] = {}
_FILE_LINE = re.compile(r"(?:[\w.~+-]*/)*(?P<base>[\w.+-]+\.(?:py|cuh|cu)):(?P<line>\d+)")
_FILE = re.compile(r"(?:[\w.~+-]*/)*[\w.+-]+\.(?:py|cuh|cu)\b")


def _wrong_names() -> re.Pattern:
    """Return a pattern of every registered known-wrong kernel's name (``op/name`` or ``name``)."""
    import workbench as wb

    names = sorted({v.name for op in wb.ops() for v in wb.known_wrong(op)}, key=len, reverse=True)
    alternatives = "|".join([re.escape(n) for n in names] + [r"wrong_\w+"])
    return re.compile(rf"\b(?:\w+/)?(?:{alternatives})\b")


def _as_answer(answer: Any) -> BugAnswer:
    if isinstance(answer, BugAnswer):
        return answer
    if isinstance(answer, dict):
        return BugAnswer(answer.get("lines", ()), answer.get("diagnosis"))
    return BugAnswer(answer)


def _is_c(path: str) -> bool:
    return path == "cu" or path.endswith((".cu", ".cuh"))


def _shape_text(shape: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def _where(case: Any) -> str:
    """Return 'M=17, N=33, K=9 (float32, inputs: edge)' for one run."""
    extra = [case.dtype] + ([f"inputs: {case.case}"] if case.case != "random" else [])
    return f"{_shape_text(case.shape)} ({', '.join(extra)})"


def _by_shape(cases: list) -> str:
    """Return a markdown list: each checked shape, whether it passes, and the input cases that fail."""
    rows: dict[str, list] = {}
    for c in cases:
        rows.setdefault(_shape_text(c.shape), []).append(c)
    out = []
    for shape, runs in rows.items():
        bad = list(dict.fromkeys(c.case for c in runs if not c.ok))
        good = list(dict.fromkeys(c.case for c in runs if c.ok))
        if not bad:
            verdict = "passes"
        elif good and bad != ["random"]:
            verdict = f"fails with inputs {', '.join(bad)} (passes with {', '.join(good)})"
        else:
            verdict = "fails"
        out.append(f"- {shape}: {verdict}")
    return "\n".join(out)


def _copy_cuda(cu: Path, text: str, op_dir: Path, tmp: Path) -> None:
    """Write ``text`` as ``cu``'s copy under ``tmp`` (a mirror of kernels/), with every local header it includes."""
    from workbench.cuda.toolchain import local_includes

    kernels_dir = op_dir.parent.resolve()
    for header in local_includes(text, cu.parent):
        try:
            dest = tmp / header.relative_to(kernels_dir)
        except ValueError:
            continue  # a header outside kernels/: the compiler finds it where it is
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(header, dest)
    target = tmp / op_dir.name / cu.relative_to(op_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _split_item(item: str) -> tuple[str, str]:
    """Return (file, name) of a show item: ``name`` (the kernel's Python file), ``cu:name``, ``path:name``."""
    if ":" in item:
        path, name = item.split(":", 1)
        return path, name
    return "py", item


def _merge_parts(parts: list[L.Part]) -> tuple[L.Part, ...]:
    """Join consecutive parts of the same caption into one block, a blank line between them."""
    out: list[L.Part] = []
    for p in parts:
        if out and out[-1].caption == p.caption:
            out[-1] = L.Part(p.caption, p.language, out[-1].lines + ("",) + p.lines)
        else:
            out.append(p)
    return tuple(out)


def _diff(wrong: L.Listing, fixed: L.Listing) -> str:
    import difflib

    d = difflib.unified_diff(wrong.lines, fixed.lines, "as written", "fixed", n=1, lineterm="")
    return "```diff\n" + "\n".join(d) + "\n```"


@atexit.register
def _cleanup() -> None:
    for p in _TMP:
        shutil.rmtree(p, ignore_errors=True)


def _normalized(src: str) -> str:
    """Return a top-level function's syntax tree as text, without its decorators, docstrings or its own name."""
    import ast

    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    top = tree.body[0]
    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
        top.name = "_"
        top.decorator_list = []  # @register is dropped from the listing; @triton.jit is on both sides
    return ast.dump(tree, include_attributes=False)
