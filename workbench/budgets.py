"""Performance budgets: limits on ``wb.profile``'s counters that a correct kernel must also meet.

An exercise or a drill whose point is speed states budgets as ``{metric: "<op> <number>  # why"}``, e.g.
``{"sectors per store request": "<= 4", "shared bank conflicts": "== 0  # pad the tile"}``. A metric is named by
its label in the profile's catalogue (``"global load efficiency"``), an alias, or its Nsight Compute key
(``"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"``); ``<op>`` is one of ``<=``, ``<``, ``>=``, ``>``, ``==``;
a fraction may be written as a percentage (``">= 90%"``). Text after ``#`` says why the limit is what it is and is
shown when the budget is missed.

The checker evaluates budgets after every run is correct: it profiles one call at the budget's stated shape
(:func:`measure`) and compares. A miss reads "Correct, but 32 sectors per store request where 4 are possible: ...".
In cpu mode the emulators' counts are exact, and a budget whose metric could not be counted (the function made no
counted launch, or one of a backend that does not count it) is a miss that says so. In gpu mode the counts come
from Nsight Compute; where it cannot run (no ``ncu``, a function it cannot replay) the budgets are reported as not
measured, never silently passed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.profile_metrics import METRICS, resolve

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda v, lim: v <= lim, "<": lambda v, lim: v < lim, ">=": lambda v, lim: v >= lim,
    ">": lambda v, lim: v > lim, "==": lambda v, lim: math.isclose(v, lim, rel_tol=1e-9, abs_tol=1e-12),
}
_EXPR = re.compile(r"^\s*(<=|>=|==|<|>)\s*([-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%?)\s*(?:#\s*(.*?))?\s*$")


class BudgetError(ValueError):
    """A budget is malformed: an unknown metric or an expression that is not '<op> <number>'."""


@dataclass(frozen=True)
class Budget:
    """One limit: the metric (as written and its key), the comparison, the limit, and why (may be empty)."""

    name: str
    key: str
    op: str
    limit: float
    why: str = ""

    def __str__(self) -> str:
        return f"{self.label} {self.op} {_value(self.key, self.limit)}"

    @property
    def label(self) -> str:
        return METRICS[self.key].label


@dataclass
class BudgetResult:
    """How one budget fared: ``value`` (None: not measured), ``ok``, and the line a learner reads (``message``)."""

    budget: Budget
    value: float | None
    ok: bool
    message: str
    measured: bool = True


@dataclass
class BudgetReport:
    """The budgets of one check: where they were measured, each result, and why none was measured (if so)."""

    where: str  # "M=64, N=64, float32"
    shape: dict = field(default_factory=dict)  # the shape they were measured at
    results: list[BudgetResult] = field(default_factory=list)
    unmeasured: str = ""  # gpu mode without ncu, ...: why nothing was measured (the budgets are not judged)
    profile: Any = None

    @property
    def missed(self) -> list[BudgetResult]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        """True when every budget is met (or, in gpu mode, could not be measured and says so)."""
        return not self.missed

    def lines(self) -> list[str]:
        """Return one line per budget: met, missed (with why) or not measured."""
        if self.unmeasured:
            return [f"budgets not measured ({self.unmeasured})"]
        return [("MISSED: " + r.message if not r.ok else "met: " + str(r.budget) if r.measured else r.message)
                for r in self.results]


def parse(budgets: Mapping[str, Any], where: str) -> list[Budget]:
    """Return the budgets of ``{metric: "<op> <number>  # why"}``; raise BudgetError naming ``where`` and the fault."""
    if not isinstance(budgets, Mapping):
        raise BudgetError(f"{where}: budgets must be a dict {{metric: '<= 4'}}, got {type(budgets).__name__}")
    out = []
    for name, expr in budgets.items():
        try:
            key = resolve(str(name))
        except KeyError as e:
            raise BudgetError(f"{where}: budget on {name!r}: {e.args[0]}") from None
        if not isinstance(expr, str):
            raise BudgetError(f"{where}: budget on {name!r} must be a string such as '<= 4' or '>= 0.9' (the "
                              f"comparison written out), got {expr!r}")
        m = _EXPR.match(expr)
        if m is None:
            raise BudgetError(f"{where}: budget on {name!r}: {expr!r} is not '<op> <number>' with <op> one of "
                              f"{list(_OPS)} (e.g. '<= 4', '== 0', '>= 90%'; a '# why' may follow)")
        op, num, pct, why = m.groups()
        limit = float(num.replace("_", "")) / (100.0 if pct else 1.0)
        if pct and METRICS[key].fmt != "fraction":
            raise BudgetError(f"{where}: budget on {name!r}: a percentage only fits a fraction metric, and "
                              f"{METRICS[key].label!r} is not one")
        out.append(Budget(str(name), key, op, limit, (why or "").strip()))
    return out


# ----------------------------------------------------------------------------------------------------- words
def _value(key: str, v: float) -> str:
    """Return ``v`` as the metric shows it: 12.5% for a fraction, 4 or 3.5 for a ratio, 1,024 for a count."""
    fmt = METRICS[key].fmt
    if fmt == "fraction":
        return f"{100 * v:.3g}%"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.3g}" if fmt in ("ratio", "float") else f"{v:,.4g}"


def _amount(key: str, v: float) -> str:
    """Return '32 sectors per store request' or 'a global load efficiency of 12.5%'."""
    meta = METRICS[key]
    if meta.fmt == "fraction":
        return f"a {meta.label} of {_value(key, v)}"
    return f"{_value(key, v)} {meta.label}"


def _possible(b: Budget) -> str:
    """Return 'where 4 are possible', 'where 90% is possible', 'where under 4 are possible'."""
    lim = _value(b.key, b.limit)
    verb = "is" if lim.endswith("%") or b.limit == 1 else "are"
    pre = {"<": "under ", ">": "over "}.get(b.op, "")
    return f"where {pre}{lim} {verb} possible"


def _missed(b: Budget, value: float) -> str:
    why = b.why or METRICS[b.key].meaning
    return f"{_amount(b.key, value)} {_possible(b)}: {why} (budget: {b})"


# ----------------------------------------------------------------------------------------------------- judging
def judge(budgets: list[Budget], prof: Any, where: str) -> BudgetReport:
    """Compare each budget with the profile ``prof``'s metrics."""
    rep = BudgetReport(where=where, profile=prof)
    metrics = prof.metrics
    for b in budgets:
        v = metrics.get(b.key)
        if v is None and getattr(prof, "source", "") == "ncu":  # a counter ncu has no name for: say so, not a miss
            rep.results.append(BudgetResult(b, None, True, f"{b}: not measured on a GPU (Nsight Compute has no "
                                            "counter for it; the emulators count it in cpu mode)", measured=False))
            continue
        if v is None:
            rep.results.append(BudgetResult(b, None, False, f"the {b.label} could not be measured: "
                                            f"{_why_missing(prof, b)}", measured=False))
            continue
        ok = _OPS[b.op](float(v), b.limit)
        rep.results.append(BudgetResult(b, float(v), ok, "" if ok else _missed(b, float(v))))
    return rep


def _why_missing(prof: Any, b: Budget) -> str:
    if not prof.launches:
        return ("your function launched no kernel the emulators count (torch and numpy operations run natively), "
                "so the budget cannot be checked: write the kernel this exercise asks for")
    if prof.notes:
        return "; ".join(prof.notes)
    backends = sorted({r.backend for r in prof.launches})
    return (f"no launch reported it (your launches ran on {', '.join(backends)}, which does not count "
            f"{b.label}): write the kernel in the backend this exercise asks for")


def measure(fn: Callable, op: str, budgets: list[Budget], shape: Mapping[str, Any], dtype: Any) -> BudgetReport:
    """Profile one call of ``fn`` (called like ``op``) at ``shape`` and ``dtype`` and judge ``budgets`` on it."""
    from workbench import profile_counters as _profile
    from workbench._mode import MODE
    from workbench.checker import quiet_floating_point  # here: the checker imports this module
    from workbench.registry import dtype_name, get_op, make_inputs

    spec = get_op(op)
    sizes, kw = spec.split(dict(shape))
    where = ", ".join(f"{k}={v}" for k, v in shape.items()) + f", {dtype_name(dtype)}"
    inputs = make_inputs(spec.name, dtype=dtype, seed=0, **dict(shape))  # make sees causal & co. too
    try:
        with quiet_floating_point():  # as the checker's runs: values are judged there
            prof = _profile.profile(fn, *inputs, **kw)
    except _profile.ProfileError as e:
        if MODE == "gpu":  # no ncu, or a call ncu cannot replay: say so, do not judge
            return BudgetReport(where=where, shape=dict(shape), unmeasured=f"gpu mode: {e}")
        raise
    except Exception as e:  # correct at the check's shapes, but the profiled call fails: a miss that says why
        return _failed(budgets, where, shape, e)
    rep = judge(budgets, prof, where)
    rep.shape = dict(shape)
    return rep


def _failed(budgets: list[Budget], where: str, shape: Mapping[str, Any], e: Exception) -> BudgetReport:
    """Return the report of budgets whose profiled call raised ``e``: every budget missed, unmeasured."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    why = (f"the profiled call at {where} raised {type(e).__name__}: {first} (every checked run passed, but the "
           "budgets are measured at this shape: run wb.profile on it to see the error)")
    rep = BudgetReport(where=where, shape=dict(shape))
    rep.results = [BudgetResult(b, None, False, f"the {b.label} could not be measured: {why}", measured=False)
                   for b in budgets]
    return rep


def default_shape(op: str) -> dict:
    """Return the shape budgets are measured at when none is stated: the op's cpu bench shape, else its last check
    shape."""
    from workbench.registry import get_op

    spec = get_op(op)
    cpu = spec.bench_shapes.get("cpu") or []
    return dict(cpu[0] if cpu else spec.check_shapes[-1])
