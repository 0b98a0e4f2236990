"""Implement drills: a blank page with the op's contract, checked by the full checker, in a required backend.

The blank page is only the op's signature and contract docstring (no TODO skeleton). ``submit`` takes a function
called like the op (or the source of a module that defines one named after the op) and runs ``wb.check`` on it,
counting the kernel launches of the drill's backend: a function that passes but launched no CUDA C kernel in a
CUDA C drill (``torch.add`` in a vecadd drill) fails with that reason. The model answer is a registered variant of
the op: the ladder is the answer key. A drill's keys (``statement``, ``backend``, ``dtypes``, ``budgets``, ...) are the
schema it shares with the exercises, and a submitted source runs through their one loader
(:mod:`workbench.practice.learner_code`).

A drill about speed carries performance budgets (``budgets``: ``{metric: "<= 4  # why"}``, see
:mod:`workbench.budgets`) measured by ``wb.profile`` at ``budget_shape`` once every run is correct: a correct answer
that misses one does not pass, and is told "Correct, but 32 sectors per store request where 4 are possible: ...".
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect as _inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.practice.base import Drill, Grade
from workbench.practice.learner_code import BACKENDS, load_entry


def torch_function_mode_base() -> type:
    """Return ``torch.overrides.TorchFunctionMode`` (imported here: torch loads with the workbench anyway)."""
    from torch.overrides import TorchFunctionMode

    return TorchFunctionMode


BACKEND_NAMES = {"cuda": "CUDA C (through wb.cuda.RawKernel / RawModule)", "triton": "Triton (@triton.jit)",
                 "numba": "Numba (@cuda.jit)"}


@contextlib.contextmanager
def count_launches(backend: str, seen: dict[str, Any] | None = None) -> Iterator[list[int]]:
    """Count the kernel launches of ``backend`` inside the block; yields a one-element list holding the count.

    ``seen`` (a dict), when given, gets ``"in_launch"`` (True while a launch runs) and ``"buffers"`` (the
    (address, bytes) of each tensor or array a launch was given): what :class:`BackendGuard` judges a call by.
    """
    targets: list[tuple[type, str]] = []
    if backend == "triton":
        from triton.runtime.jit import JITFunction

        targets.append((JITFunction, "run"))
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append((InterpretedFunction, "run"))
        except ImportError:
            pass
    elif backend == "cuda":
        from workbench.cuda import Function, RawKernel

        targets += [(RawKernel, "__call__"), (Function, "__call__")]
    elif backend == "numba":
        targets += _numba_launch_targets()
    else:
        raise ValueError(f"count_launches: backend must be one of {BACKENDS}, got {backend!r}")
    count = [0]
    saved = [(cls, name, cls.__dict__[name]) for cls, name in targets]

    def wrap(orig: Callable) -> Callable:
        def launched(*args: Any, **kwargs: Any) -> Any:
            if backend == "numba" and not _numba_is_launch(args[0]):
                return orig(*args, **kwargs)  # a device function called from a kernel, or an unconfigured kernel
            count[0] += 1
            if seen is None:
                return orig(*args, **kwargs)
            seen.setdefault("buffers", []).extend(_buffers((args, kwargs)))
            outer, seen["in_launch"] = seen.get("in_launch", False), True
            try:
                return orig(*args, **kwargs)
            finally:
                seen["in_launch"] = outer

        return launched

    for cls, name, orig in saved:
        setattr(cls, name, wrap(orig))
    try:
        yield count
    finally:
        for cls, name, orig in saved:
            setattr(cls, name, orig)


def _numba_launch_targets() -> list[tuple[type, str]]:
    """Return the method a Numba kernel launch goes through: the simulator's in cpu mode, numba-cuda's on a GPU."""
    from workbench import MODE
    from workbench.numba_helpers import PROBLEM

    if PROBLEM is not None:  # numba failed to import: its kernels refuse to launch, so there is nothing to count
        return []
    if MODE == "gpu":
        from numba.cuda.dispatcher import _LaunchConfiguration

        return [(_LaunchConfiguration, "__call__")]
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return [(FakeCUDAKernel, "__call__")]


def _numba_is_launch(target: Any) -> bool:
    """True for a configured kernel launch (``kernel[grid, block](...)``), False for a device-function call."""
    if type(target).__name__ == "_LaunchConfiguration":
        return True
    return not getattr(target, "_device", False) and getattr(target, "grid_dim", None) is not None


def _buffers(obj: Any, depth: int = 3) -> list[tuple[int, int]]:
    """Return the (address, bytes) of the torch tensors and numpy arrays in a launch's arguments."""
    import numpy as np
    import torch

    if isinstance(obj, torch.Tensor):
        return [(obj.data_ptr(), obj.untyped_storage().nbytes())] if obj.numel() else []
    if isinstance(obj, np.ndarray):
        return [(obj.__array_interface__["data"][0], obj.nbytes)] if obj.size else []
    cai = getattr(obj, "__cuda_array_interface__", None)  # a numba device array (gpu mode)
    if isinstance(cai, dict) and cai.get("data") and getattr(obj, "nbytes", 0):
        return [(int(cai["data"][0]), int(obj.nbytes))]
    if depth and isinstance(obj, (tuple, list)):
        return [b for x in obj for b in _buffers(x, depth - 1)]
    if depth and isinstance(obj, dict):
        return [b for x in obj.values() for b in _buffers(x, depth - 1)]
    return []


# Torch functions that write into a tensor: refused outside a launch (the kernel writes the outputs); fills of a
# fresh buffer (wb.empty's poison, a zeroed accumulator) are allowed.
_WRITES = {"copy_", "__setitem__", "index_put_", "index_copy_", "scatter_", "masked_scatter_", "set_"}
_FILLS = {"fill_", "zero_", "requires_grad_", "resize_"}
_ALLOCATE = {"empty", "empty_like", "new_empty", "zeros", "zeros_like", "empty_strided", "full", "full_like",
             "new_zeros", "new_full"}
# Torch functions a drill's function may call on its inputs outside a launch: allocation, views and metadata.
_ALLOWED = {"view", "reshape", "contiguous", "t", "transpose", "permute", "unsqueeze", "squeeze", "flatten",
            "expand", "__getitem__", "narrow", "select", "as_strided", "size", "stride", "dim", "numel", "data_ptr",
            "element_size", "is_contiguous", "storage_offset", "untyped_storage", "__get__", "is_floating_point",
            "__len__", "empty_like", "new_empty", "detach", "unflatten", "view_as", "split", "chunk", "unbind",
            "__format__", "__repr__", "__bool__", "_is_view", "is_complex", "get_device", "__hash__", "numpy"}


class BackendGuard:
    """Wrap a drill answer so each call is refused unless the drill's backend did its work.

    Outside the backend's launches, torch may allocate and take views or metadata of the inputs, nothing else (no
    arithmetic, copies, conversions or ``.numpy()`` of an input, or of a view of one); and every output returned must
    be (a view into) a buffer one of the call's launches was given. Both raise
    :class:`workbench.checker.BackendWorkError`: the checker's ``outside_backend``.
    """

    def __init__(self, fn: Callable, backend: str) -> None:
        self.fn, self.backend = fn, backend
        self.seen: dict[str, Any] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        from workbench.checker import BackendWorkError

        self.seen.clear()
        with _NoTorchCompute(self.backend, self.seen, [a for a in args if isinstance(a, torch.Tensor)]):
            out = self.fn(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        for k, o in enumerate(outs):
            if not isinstance(o, torch.Tensor) or not o.numel():
                continue
            what = f"output {k}" if len(outs) > 1 else "the output"
            if not _within(o, self.seen.get("fresh", [])):
                raise BackendWorkError(f"{what} was not allocated during the call (wb.empty / wb.empty_like): in this "
                                       "drill your kernel writes a buffer you allocate, poisoned under the checker")
            if not _within(o, self.seen.get("buffers", [])):
                raise BackendWorkError(f"{what} is not a buffer any {BACKEND_NAMES[self.backend]} launch of this call "
                                       "was given: in this drill the kernel writes the outputs")
        return out


def _within(t: Any, ranges: list[tuple[int, int]]) -> bool:
    p = t.data_ptr()
    return any(start <= p < start + n for start, n in ranges)


class _NoTorchCompute(torch_function_mode_base()):  # type: ignore[misc]
    """Refuse torch compute on the call's inputs (and what is derived from them) outside the backend's launches."""

    def __init__(self, backend: str, seen: dict[str, Any], inputs: list) -> None:
        super().__init__()
        self.backend, self.seen = backend, seen
        self.tainted: dict[int, Any] = {}  # id -> weakref (a WeakSet would compare tensors with ==)
        for t in inputs:
            self._taint(t)
        self.ranges = [(t.data_ptr(), t.untyped_storage().nbytes()) for t in inputs if t.numel()]

    def _taint(self, t: Any) -> None:
        import weakref

        self.tainted[id(t)] = weakref.ref(t)

    def _is_tainted(self, t: Any) -> bool:
        ref = self.tainted.get(id(t))
        return ref is not None and ref() is t

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        import torch

        kwargs = kwargs or {}
        if self.seen.get("in_launch"):
            return func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        flat = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        flat += [t for a in args if isinstance(a, (tuple, list)) for t in a if isinstance(t, torch.Tensor)]
        touched = any(self._is_tainted(t) for t in flat)
        writes = name in _WRITES or (name.endswith("_") and not name.startswith("_") and name not in _FILLS)
        if (touched and name not in _ALLOWED) or writes:
            from workbench.checker import BackendWorkError

            what = "an input" if touched else "a tensor"
            raise BackendWorkError(f"torch.{name} on {what}, outside any {BACKEND_NAMES[self.backend]} launch: in "
                                   "this drill torch may only allocate and take views; the kernel does the work")
        out = func(*args, **kwargs)
        results = [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]
        for t in results:
            if touched or self._inside_input(t):
                self._taint(t)
            elif name in _ALLOCATE and t.numel():
                self.seen.setdefault("fresh", []).append((t.data_ptr(), t.untyped_storage().nbytes()))
        return out

    def _inside_input(self, t: Any) -> bool:
        """True when ``t``'s data lies in an input's memory (``torch.from_numpy(x.numpy())`` and the like)."""
        if not t.numel():
            return False
        p = t.data_ptr()
        return any(start <= p < start + n for start, n in self.ranges)


def _signature_text(fn: Callable) -> str:
    """Return ``fn``'s signature as source text (string annotations unquoted): ``(x: torch.Tensor) -> torch.Tensor``."""
    sig = _inspect.signature(fn)

    def ann(a: Any) -> str:
        return a if isinstance(a, str) else _inspect.formatannotation(a)

    params = []
    for p in sig.parameters.values():
        s = p.name + (f": {ann(p.annotation)}" if p.annotation is not p.empty else "")
        if p.default is not p.empty:
            s += f" = {p.default!r}" if p.annotation is not p.empty else f"={p.default!r}"
        params.append(s)
    ret = f" -> {ann(sig.return_annotation)}" if sig.return_annotation is not sig.empty else ""
    return f"({', '.join(params)}){ret}"


@dataclass(frozen=True)
class FailureHeadline:
    """The lead of a failed check's feedback: the diagnosis, and the failing run it comes from, shown first."""

    diagnosis: str | None
    case: Any  # the workbench.checker.CaseResult the diagnosis comes from
    bad: int  # failing runs
    runs: int  # all runs
    note: str = ""  # what the failing runs share that the passing ones do not (a flag value), or ""

    def where(self) -> str:
        """Return 'M=17, N=33, K=9 (float32)' for the run, with its input case and probe kind when they matter."""
        c = self.case
        shape = ", ".join(f"{k}={v}" for k, v in c.shape.items())
        extra = [c.dtype] + ([f"case {c.case}"] if c.case != "random" else []) + ([c.probe] if c.probe else [])
        return f"{shape} ({', '.join(extra)})"

    def text(self, markdown: bool = False) -> str:
        """Return the headline: what failed, the diagnosis in words, and the run it comes from (the first shown)."""
        from workbench.checker import DIAGNOSES

        c, d = self.case, self.diagnosis
        if d == "error":
            return f"your function {c.detail} on {self.where()}."
        if d == "bad_output":
            return f"your function {c.detail} on {self.where()}. Return the output tensor(s) you allocated."
        words = DIAGNOSES.get(d or "", "")
        if markdown:
            note = f"\n\n{self.note}" if self.note else ""
            return (f"{self.bad} of {self.runs} runs are wrong.{note}\n\nWhat is wrong: **{d}**: {words}\n\n"
                    f"First failure: `{c.line()}`")
        note = f"\n  {self.note}" if self.note else ""
        return (f"{self.bad} of {self.runs} runs are wrong.{note}\n  What is wrong: {d}: {words}\n"
                f"  First failure: {c.line()}")


def failure_headline(report: Any) -> FailureHeadline:
    """Return the headline of a failed :class:`workbench.checker.CheckReport`: one function for drills and exercises.

    The diagnosis is the report's, and the failure shown first is the run it comes from
    (``report.telling_failure``), so the headline never names one mistake and shows a run with another.
    """
    case = report.telling_failure
    if case is None:
        raise ValueError(f"failure_headline: {report.op}/{report.name} has no failing run")
    return FailureHeadline(case.diagnosis, case, sum(not c.ok for c in report.runs), len(report.runs),
                           _flag_note(report))


def _flag_note(report: Any) -> str:
    """Return 'Every failing run has renormalize=False ...' when one flag value separates failing from passing runs."""
    from workbench.registry import get_op

    for flag, values in get_op(report.op).flags.items():
        def value(c: Any, flag: str = flag, default: Any = values[0]) -> str:
            return repr(c.shape.get(flag, default))

        bad = {value(c) for c in report.runs if not c.ok}
        good = {value(c) for c in report.runs if c.ok}
        if len(bad) == 1 and good and not bad & good:
            v = next(iter(bad))
            return (f"Every failing run has {flag}={v}, and every run with {flag}={' or '.join(sorted(good))} "
                    f"passes: does your function honour `{flag}`?")
    return ""


@dataclass(eq=False, repr=False)
class ImplementDrill(Drill):
    """Write the op from a blank page in the drill's backend; ``d.submit(my_fn)`` runs the full checker."""

    backend: str = "triton"
    model: str = ""  # the registered variant that is the model answer
    task: str = ""  # markdown: what to write, and what the drill is about
    dtypes: tuple[str, ...] = ()  # () = the checker's default for a function: float32, else the op's first dtype
    shapes: tuple[dict, ...] | None = None  # default: the op's ragged check shapes
    budgets: dict[str, str] = field(default_factory=dict)  # metric -> "<= 4  # why" (workbench.budgets)
    budget_shape: dict | None = None  # where the budgets are measured (default: the op's cpu bench shape)
    options: dict[str, Any] = field(default_factory=dict)  # the table's other checker keys (seeds, cases, fixed_flags)
    inspect: Any = None  # a workbench.practice.hopper.InspectRule: graded by the compiled code where no GPU runs it

    @property
    def entry(self) -> str:
        """Return the name of the function to write (the op's name)."""
        return self.op

    def blank(self) -> str:
        """Return the blank page: imports, and the op's signature with its contract as the docstring."""
        import workbench as wb

        spec = wb.get_op(self.op)
        sig = _signature_text(spec.reference)
        contract = textwrap.dedent(importlib.import_module(spec.make.__module__).__doc__ or "").strip()
        doc = "\n".join(["" if not s.strip() else "    " + s for s in
                         [spec.signature, "", *contract.splitlines(), "",
                          f"Write it in {BACKEND_NAMES[self.backend]}; allocate outputs with wb.empty / "
                          "wb.empty_like."]])
        imports = "import torch\n" + {"triton": "import triton\nimport triton.language as tl\n",
                                       "numba": "import math\n\nimport numpy as np\nfrom numba import cuda\n"}.get(
            self.backend, "import numpy as np\n")
        return (f"{imports}\nimport workbench as wb\n\n\ndef {self.entry}{sig}:\n    \"\"\"{doc.lstrip()}\n    \"\"\"\n"
                f"    raise NotImplementedError(\"{self.entry}: write it\")\n")

    def statement(self) -> str:
        return (f"{self.task}\n\nStart from this blank page (copy it into a cell):\n\n```python\n{self.blank()}```\n\n"
                f"The check is the full checker: `wb.check` at the op's ragged shapes, dtypes {self.checked_dtypes()}, "
                f"fresh random inputs and poisoned outputs.\n\n{self.rule()}{self._budget_text()}"
                f"{self._inspect_text()}")

    def rule(self) -> str:
        """Return the drill's rule on who does the work (the same words for every implement drill)."""
        return (f"**The rule:** the {BACKEND_NAMES[self.backend]} kernels do the work. While your function runs, "
                "torch may allocate and take views of the inputs, nothing more: torch arithmetic, copies, "
                "conversions or `.numpy()` of an input (or of a view of one) outside a launch fail the check, and "
                f"every output you return must be a buffer one of your {self.backend} launches was given (outputs "
                "start poisoned, so an element no launch writes fails too).")

    def answer_format(self) -> str:
        return (f"your function: `d.submit({self.entry})` (or the source of a cell that defines `{self.entry}`, as a "
                "string).")

    def checked_dtypes(self) -> list[str]:
        """Return the dtypes the check runs (the drill's, else float32 or the op's only dtype)."""
        import workbench as wb
        from workbench.registry import dtype_name

        if self.dtypes:
            return list(self.dtypes)
        spec = wb.get_op(self.op)
        return [dtype_name(spec.dtypes[0]) if "float32" not in map(dtype_name, spec.dtypes) else "float32"]

    def _check_kw(self) -> dict:
        from workbench.registry import variant

        # probes stay within what the statement promises: the sizes the model answer runs (its head dims, ...)
        kw: dict[str, Any] = {**self.options, "dtypes": self.checked_dtypes(),
                              "runs_like": variant(self.op, self.model)}
        if self.shapes is not None:
            kw["shapes"] = [dict(s) for s in self.shapes]
        if self.budgets:
            kw["budgets"] = dict(self.budgets)
            if self.budget_shape is not None:
                kw["budget_shape"] = dict(self.budget_shape)
        return kw

    def _inspect_text(self) -> str:
        """Return the statement's paragraph on the compiler's check ('' for a drill without an inspect rule)."""
        return self.inspect.text() if self.inspect is not None else ""

    def _budget_text(self) -> str:
        """Return the statement's paragraph on the drill's performance budgets ('' without any)."""
        from workbench import budgets as _budgets

        limits = _budgets.parse(self.budgets, f"drill {self.id}")
        if not limits:
            return ""
        shape = self.budget_shape or _budgets.default_shape(self.op)
        at = ", ".join(f"{k}={v}" for k, v in shape.items())
        items = "".join(f"- {b}" + (f" ({b.why})" if b.why else "") + "\n" for b in limits)
        return (f"\n\nPerformance budgets, counted by `wb.profile` at {at} once every run is correct (a correct but "
                f"slower kernel does not pass):\n\n{items}")

    def _grade(self, answer: Any) -> Grade:
        from workbench import checker
        from workbench.checker import check
        from workbench.registry import OpError, UnsupportedHere

        if isinstance(answer, str):
            trusted = checker._trusted()
            fn = load_entry(answer, self.entry, f"drill {self.id}")
            changed = checker._restore_checker(trusted)
            if changed:
                return Grade(False, f"Not yet: your source changed the checker ({', '.join(sorted(changed)[:5])}); "
                                    "it was put back. An answer defines its function and leaves the checker alone.",
                             "tampered with the checker")
        elif callable(answer):
            fn = answer
        else:
            raise TypeError(f"drill {self.id}: submit your function {self.entry} (or its source as a string), got "
                            f"{type(answer).__name__}")
        name = getattr(fn, "__name__", "fn")
        if self.inspect is not None:  # the compiler's check first; without a GPU it is the whole verdict
            from workbench import MODE
            from workbench.practice.hopper import grade_by_inspection

            verdict = grade_by_inspection(self, fn)
            if not verdict.passed or (MODE != "gpu" and not self.inspect.run):
                return verdict
        guarded = BackendGuard(fn, self.backend)
        try:
            with count_launches(self.backend, guarded.seen) as launches:
                report = check(guarded, self.op, **self._check_kw())
        except (OpError, UnsupportedHere, TypeError) as e:
            return Grade(False, f"Not yet: {e}", f"{name}: {type(e).__name__}")
        n, bad = len(report.runs), sum(not c.ok for c in report.runs)
        summary = f"{name}: {n - bad}/{n} runs pass, {launches[0]} {self.backend} launches"
        if launches[0] == 0 and (report.correct or report.diagnosis == "outside_backend"):
            how = "passes the checker" if report.correct else "computes with torch"
            return Grade(False, f"Your function {how}, but it launched no {BACKEND_NAMES[self.backend]} "
                                "kernel: this drill is about writing one.", summary, {"report": report})
        if report.correct and not report.ok:
            missed = report.budgets.missed
            also = "".join(f"\n\nAlso: {r.message}" for r in missed[1:])
            return Grade(False, f"Correct, but {missed[0].message}{also}\n\n(All {n} runs match the float64 "
                                f"reference; the budgets are counted by `wb.profile` at {report.budgets.where}.) "
                                "Stuck? `d.hint()`.", summary + ", over budget", {"report": report})
        if report.ok:
            within = ""
            if report.budgets is not None:
                met = [str(r.budget) for r in report.budgets.results if r.measured]
                within = f" and within budget ({'; '.join(met)})" if met else ""
                within += "".join(f" ({ln})" for ln in report.budgets.lines() if not ln.startswith("met: "))
            return Grade(True, f"Correct{within}: all {n} runs match the float64 reference (sizes "
                               f"{sorted({tuple(c.shape.values()) for c in report.cases})}, dtypes "
                               f"{sorted({c.dtype for c in report.cases})}), with {launches[0]} "
                               f"{self.backend} kernel launches. Compare with the model answer: d.reveal().",
                         summary, {"report": report})
        fb = "Not yet: " + failure_headline(report).text(markdown=True)
        return Grade(False, fb + "\n\nStuck? `d.hint()`.", summary, {"report": report})

    def model_answer(self) -> Callable:
        import workbench as wb

        return wb.variant(self.op, self.model)

    def explanation(self) -> str:
        v = self.model_answer()
        src = Path(v.source).read_text() if v.source else ""
        cu = f"\n\n```cpp\n{Path(v.cu_file).read_text()}```" if v.cu_file is not None else ""
        return (f"The registered variant `{v.op}/{v.name}` ({v.backend}): {v.idea}\n\n"
                f"```python\n{src}```{cu}\n\nCall it like your function: `wb.check(d.reveal(), '{self.op}')`.")
