"""The one registry of ops and kernel variants that notebooks, tests, benchmarks and exercises iterate.

An *op* (``gemm``, ``softmax``, ...) is a contract: input names and shapes, a float64 reference, FLOP and byte
formulas, input generation, validation and the shapes the checker tries. A *variant* is one implementation of an
op, registered once with its backend, a one-line idea and where it runs. Variants are called like the op:
``v(*inputs, **kw)`` with torch tensors on :func:`workbench.device` in and a torch tensor out.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.util
import inspect as _inspect
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from workbench import dtypes
from workbench._mode import MODE
from workbench._sanitize import switched

BACKENDS = ("torch", "numba", "cupy", "cuda", "triton", "cute")
#: The package whose import registers every op contract (``kernels/__init__.py``); its modules hold the variants.
KERNELS_PACKAGE = "kernels"
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in dtypes.NAMES}


class OpError(ValueError):
    """An op was called with inputs that break its contract (shape, dtype, device, layout)."""


class UnsupportedHere(RuntimeError):
    """A variant cannot run in this mode (GPU-only kernel in cpu mode, bf16 under the Triton interpreter, ...)."""


@dataclass(frozen=True)
class CpuLimit:
    """The largest problem a variant takes in cpu mode, where its emulator is slow: declared data, not code.

    ``size`` is a product of shape keys and integers (``"M*N*K"``, ``"3*T*top_k*I*d"``), ``most`` its largest value
    there, ``why`` what makes the emulation slow (``"the Numba simulator runs one OS thread per CUDA thread"``). On
    a GPU any size runs.
    """

    size: str
    most: int
    why: str

    def value(self, shape: dict) -> int:
        """Return ``size`` evaluated at ``shape``."""
        v = 1
        for f in self.size.split("*"):
            f = f.strip()
            v *= int(f) if f.isdigit() else int(shape[f])
        return v

    def problem(self, who: str, shape: dict) -> str | None:
        """Return why ``who`` refuses ``shape`` in cpu mode, or None when it fits."""
        v = self.value(shape)
        if v <= self.most:
            return None
        return f"{who}: {self.size} <= {self.most} in cpu mode ({self.why}), got {v}; on a GPU any size runs"


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """Return the torch dtype for a torch dtype or its name ('float16', 'fp16', 'bf16', ...)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return DTYPES[dtypes.canonical(dtype)]


def dtype_name(dtype: torch.dtype | str) -> str:
    """Return the short name of a dtype ('float16')."""
    return str(as_dtype(dtype)).replace("torch.", "")


# ----------------------------------------------------------------------------------------------------------- ops


@dataclass
class Op:
    """The contract of one op: how to make, validate and check its inputs, and what it costs."""

    name: str
    signature: str  # human-readable, e.g. "gemm(a[M,K], b[K,N]) -> [M,N]"
    shape_keys: tuple[str, ...]  # the named sizes, e.g. ("M", "N", "K")
    make: Callable[..., tuple]  # make(shape: dict, dtype, seed, device) -> positional inputs
    validate: Callable[..., dict]  # validate(*inputs, **kw) -> shape dict; raises OpError
    reference: Callable[..., torch.Tensor]  # float64 reference, same call convention as variants
    flops: Callable[..., float]  # flops(**shape)
    bytes: Callable[..., float]  # bytes(dtype=..., **shape): minimum DRAM traffic
    check_shapes: list[dict]  # ragged shapes the checker tries by default (cpu-mode sized)
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
    call_kwargs: tuple[str, ...] = ()  # shape-dict keys passed as keyword arguments (causal, ...)
    tolerance: Callable[..., tuple[float, float]] | None = None  # (dtype, shape) -> (atol, rtol)
    package: str = ""  # module that registers this op's variants
    bench_shapes: dict[str, list[dict]] = field(default_factory=dict)  # "gpu"/"quick"/"cpu" -> shapes
    size_key: Callable[[dict], int] | None = None  # one number for plots' x axis
    cases: tuple[str, ...] = ("random",)  # input cases make() knows; the checker tries each ("edge", ...)
    # The shapes a case runs on by default (case -> shape -> bool; default: every shape): keeps a costly case
    # (attention's NaN inputs) to the few small shapes that show what it is about.
    case_shapes: dict[str, Callable[[dict], bool]] = field(default_factory=dict)
    doc: str = ""
    outputs: tuple[str, ...] = ()  # names of the outputs when the op returns a tuple (attention_bwd: dq, dk, dv)
    dtype_of: Callable[..., torch.dtype] | None = None  # the op's dtype from its inputs, when they mix dtypes
    out_dtypes: Callable[[torch.dtype], tuple[torch.dtype, ...]] | None = None  # each output's dtype (default: op's)
    # Put a kernel's outputs in the contract's canonical form before they are compared (an order the contract
    # leaves free, e.g. slots scattered with atomics): canonical(outputs, ref_outputs, *inputs, **kw) -> outputs.
    canonical: Callable[..., list[torch.Tensor]] | None = None
    # Name an op-specific classic mistake of a failing run before the generic patterns are tried, by recomputing
    # the mistake (attention: the causal diagonal tile left unmasked): explain(outputs, ref_outputs, inputs, kw,
    # atol, rtol) -> a key of workbench.checker.DIAGNOSES, or None.
    explain: Callable[..., str | None] | None = None
    # Each optional argument of the signature (a key of call_kwargs) and the values the check must cover:
    # {"renormalize": (True, False)}; the first value is the signature's default.
    flags: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # The input cases holding NaN, +-Inf or huge values where the op defines the result; a case not in ``cases``
    # (gemm's "special", softmax's "inf") runs once per check as a probe, on one small shape.
    specials: tuple[str, ...] = ()
    # One shape past 2^16 elements (index width) for an op cheap enough to emulate at it: run once per check.
    wide_shape: dict | None = None
    # True for an op whose variants run on the ranks of a process group (all_reduce, ...): make returns each rank's
    # inputs, reference each rank's expected output, and wb.check runs it through workbench.comm_check.
    distributed: bool = False

    def __post_init__(self) -> None:
        raw = self.bytes

        def nbytes(dtype: torch.dtype | str = torch.float32, **shape: Any) -> float:
            return raw(dtype=as_dtype(dtype), **shape)

        nbytes.__doc__ = "Return the minimum DRAM bytes of one call at ``shape`` and ``dtype`` (a dtype or its name)."
        self.bytes = nbytes

    def split(self, shape: dict) -> tuple[dict, dict]:
        """Split a shape dict into (sizes for make_inputs, keyword arguments for the call)."""
        sizes = {k: v for k, v in shape.items() if k not in self.call_kwargs}
        kw = {k: v for k, v in shape.items() if k in self.call_kwargs}
        return sizes, kw

    def size_of(self, shape: dict) -> int:
        """Return the single number plots use as 'problem size' for this shape."""
        if self.size_key is not None:
            return int(self.size_key(shape))
        n = 1
        for k in self.shape_keys:
            n *= int(shape.get(k, 1))
        return n


_OPS: dict[str, Op] = {}
_VARIANTS: dict[str, list[Variant]] = {}
_LOADED: set[str] = set()
_LADDERS: dict[str, tuple[str, ...]] = {}


#: Op fields that an op's reference module defines as functions of these names (``bytes`` is ``nbytes`` there).
CONTRACT_NAMES = {"make": "make", "validate": "validate", "reference": "reference", "flops": "flops",
                  "bytes": "nbytes", "tolerance": "tolerance", "explain": "explain"}


def contract(namespace: dict[str, Any]) -> dict[str, Callable]:
    """Return the contract functions a reference module defines, as Op fields: ``Op(..., **contract(globals()))``.

    make, validate and reference are required; flops, nbytes (the ``bytes`` field), tolerance and explain are taken
    where the module defines them. A field given as a lambda instead stays an explicit keyword of ``Op``.
    """
    missing = [n for n in ("make", "validate", "reference") if not callable(namespace.get(n))]
    if missing:
        raise TypeError(f"{namespace.get('__name__', '?')} defines no {', '.join(missing)}(): "
                        "an op contract needs make, validate and reference")
    return {field: namespace[name] for field, name in CONTRACT_NAMES.items() if callable(namespace.get(name))}


def register_op(op: Op) -> Op:
    """Register an op contract (once; re-registering the same name replaces it, for notebook reloads)."""
    _OPS[op.name] = op
    _VARIANTS.setdefault(op.name, [])
    return op


def _load(name: str, with_variants: bool = True) -> None:
    if name not in _OPS:
        importlib.import_module(KERNELS_PACKAGE)  # registers every op contract
    if name not in _OPS:
        raise KeyError(f"unknown op {name!r}: known ops are {sorted(_OPS)}")
    pkg = _OPS[name].package
    if with_variants and pkg and pkg not in _LOADED:
        _LOADED.add(pkg)
        try:
            importlib.import_module(pkg)
        except Exception:
            _LOADED.discard(pkg)
            raise


def get_op(name: str | Op, with_variants: bool = False) -> Op:
    """Return the op contract named ``name``, or raise naming the known ops.

    ``with_variants`` also imports the op's variants (numba/triton/CUDA C kernels), which takes a moment.
    """
    if isinstance(name, Op):
        return name
    if not isinstance(name, str):
        raise TypeError(f"op must be an op name (str), got {type(name).__name__}")
    _load(name, with_variants)
    return _OPS[name]


def ops() -> list[str]:
    """Return the names of all registered ops."""
    importlib.import_module(KERNELS_PACKAGE)
    return sorted(_OPS)


# ------------------------------------------------------------------------------------------------------ variants

_CHECKING: contextvars.ContextVar[bool] = contextvars.ContextVar("wb_checking", default=False)


def poisoning(on: bool = True) -> contextlib.AbstractContextManager[None]:
    """Make :func:`empty` fill new outputs with poison (NaN / int sentinel) inside this block."""
    return switched(_CHECKING, on)


POISON_INT = -0x5A5A5A5A
# Float poison: a quiet NaN with a payload, as raw bits per dtype. Arithmetic makes canonical NaNs (0x7FC00000 or
# 0xFFC00000 on CPUs, 0x7FFFFFFF on NVIDIA GPUs), never these, so the checker can tell a NaN the kernel computed (an
# overflow: exp without the max subtracted, inf - inf, 0/0) from an element it never wrote. fp8 formats have no
# room for a payload (e4m3fn has one NaN, 0x7F): there every NaN counts as poison.
_POISON_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float64: (torch.int64, 0x7FF8A5A5A5A5A5A5),
    torch.float32: (torch.int32, 0x7FC5A5A5),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
}


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with the checker's poison: the payload NaN of its float dtype, else ``POISON_INT``."""
    if t.dtype in _POISON_BITS:
        it, bits = _POISON_BITS[t.dtype]
        t.view(it).fill_(bits)
    elif t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(POISON_INT)
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Return a bool mask of the elements of ``t`` that still hold the poison :func:`poison_` writes."""
    if t.dtype in _POISON_BITS:
        it, bits = _POISON_BITS[t.dtype]
        return t.contiguous().view(it) == bits
    if t.is_floating_point():
        return torch.isnan(t)
    return t == POISON_INT


def empty(shape: Sequence[int] | torch.Size, dtype: torch.dtype, device: torch.device | str | None = None
          ) -> torch.Tensor:
    """Allocate a kernel output; under the checker it is poisoned so unwritten elements are caught.

    Variants allocate their outputs with this instead of ``torch.empty``: outside :func:`workbench.check` it is
    ``torch.empty``; inside, floats start as a NaN with a payload no arithmetic produces and integers as
    ``POISON_INT`` (:func:`poison_`), so an element the kernel never writes cannot pass by luck (a fresh
    ``torch.empty`` often holds the right answer from the previous run), and is told apart from a computed NaN.
    """
    from workbench import device as _device

    out = torch.empty(tuple(shape), dtype=dtype, device=device if device is not None else _device())
    if _CHECKING.get():
        poison_(out)
    return out


def empty_like(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Allocate an output shaped like ``t`` (poisoned under the checker)."""
    return empty(t.shape, dtype or t.dtype, t.device)


@dataclass(eq=False)
class Variant:
    """One registered implementation of an op; call it like the op."""

    op: str
    name: str
    backend: str
    idea: str
    fn: Callable[..., torch.Tensor]
    gpu_only: bool = False
    dtypes: tuple[torch.dtype, ...] = ()
    source: Path | None = None  # the Python file that defines it
    cu_file: Path | None = None  # the .cu file for backend "cuda"
    expected_diagnosis: str | None = None  # set for known-wrong kernels: what the checker must say
    supports: Callable[..., str | None] | None = None  # (shape[, dtype]) -> None if fine, else why not
    inspect_spec: Callable[[], dict] | None = None  # for workbench.inspect
    flops_fn: Callable[..., float] | None = None
    bytes_fn: Callable[..., float] | None = None
    gpu_note: str = ""  # why it is GPU-only
    bf16_dot: bool = True  # False when its tl.dot never takes bf16 operands even though the op's dtype is bf16
    cpu_limit: CpuLimit | None = None  # the largest problem it takes in cpu mode (emulators are slow)
    alignment: int = 0  # bytes its launcher needs its inputs' data aligned to; a misaligned input is copied
    # True: the same inputs give bitwise-identical outputs on every call (a fixed reduction order); False: they may
    # not (atomics, lock order); None: not declared.
    deterministic: bool | None = None

    @property
    def known_wrong(self) -> bool:
        """True for deliberately wrong kernels kept to show what the checker catches."""
        return self.expected_diagnosis is not None

    @property
    def contract(self) -> Op:
        return get_op(self.op)

    def flops(self, **shape: Any) -> float:
        """Return the FLOPs of one call at ``shape`` (the op's formula unless the variant overrides it)."""
        shape.pop("dtype", None)
        f = self.flops_fn or self.contract.flops
        return float(f(**shape))

    def bytes(self, dtype: torch.dtype | str = torch.float32, **shape: Any) -> float:
        """Return the minimum DRAM bytes of one call at ``shape`` and ``dtype``."""
        f = self.bytes_fn or self.contract.bytes
        return float(f(dtype=as_dtype(dtype), **shape))

    def why_not_here(self, dtype: torch.dtype | str | None = None, shape: dict | None = None) -> str | None:
        """Return why this variant cannot run here with ``dtype``/``shape``, or None if it can."""
        if self.backend == "cute" and (why := _cute_problem(self, as_dtype(dtype) if dtype is not None else None)):
            return why
        if self.gpu_only and MODE != "gpu":
            note = f" ({self.gpu_note})" if self.gpu_note else ""
            return (f"{self.op}/{self.name} is GPU-only{note}; this is cpu mode. "
                    f"Read its compiled code with workbench.inspect(...) instead.")
        if dtype is not None:
            dt = as_dtype(dtype)
            if self.dtypes and dt not in self.dtypes:
                return (f"{self.op}/{self.name} supports dtypes {[dtype_name(d) for d in self.dtypes]}, "
                        f"not {dtype_name(dt)}")
            if MODE == "cpu" and dt == torch.bfloat16 and self.backend == "triton" and self.bf16_dot:
                what = "tl.dot and arithmetic" if _mentions_dot(self.source) else "arithmetic"
                return (f"{self.op}/{self.name}: bfloat16 under the Triton interpreter (cpu mode) computes garbage "
                        f"silently (numpy has no bfloat16, so the interpreter's bf16 {what} work on raw 16-bit "
                        "patterns); use float16 or float32 here, bfloat16 on a GPU")
            if MODE == "cpu" and dt == torch.bfloat16 and self.backend in ("numba", "cupy"):
                return (f"{self.op}/{self.name}: numpy has no bfloat16, so the {self.backend} emulation in cpu mode "
                        "cannot take it; use float16 or float32 here")
        if shape is None:
            return None
        if self.supports is not None:
            why = self.supports(shape, as_dtype(dtype)) if dtype is not None and _takes_dtype(self.supports) \
                else self.supports(shape)
            if why:
                return why
        if MODE == "cpu" and self.cpu_limit is not None:
            return self.cpu_limit.problem(f"{self.op}/{self.name}", shape)
        return None

    def runs_here(self, dtype: torch.dtype | str | None = None, shape: dict | None = None) -> bool:
        """Return True when this variant can run in the current mode with ``dtype``/``shape``."""
        return self.why_not_here(dtype, shape) is None

    @property
    def native(self) -> bool:
        """True when it runs natively (on a GPU, or a torch variant anywhere), False when emulated."""
        return MODE == "gpu" or self.backend == "torch"

    def __call__(self, *inputs: Any, **kw: Any) -> torch.Tensor:
        op = self.contract
        shape = op.validate(*inputs, **kw)
        dts = {t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()}
        dt = op.dtype_of(*inputs) if op.dtype_of is not None else (next(iter(dts)) if len(dts) == 1 else None)
        why = self.why_not_here(dt, {**shape, **kw})
        if why:
            raise UnsupportedHere(why)
        if self.alignment:
            inputs = tuple(_aligned(t, self.alignment) for t in inputs)
        return self.fn(*inputs, **kw)

    def __repr__(self) -> str:
        where = "GPU only" if self.gpu_only else "GPU + cpu emulation"
        return f"<Variant {self.op}/{self.name} [{self.backend}, {where}]: {self.idea}>"


def _aligned(t: Any, nbytes: int) -> Any:
    """Return tensor ``t``, or a copy whose data starts on an ``nbytes`` boundary (a view into a larger buffer)."""
    if isinstance(t, torch.Tensor) and t.numel() and t.data_ptr() % nbytes:
        return t.clone()
    return t


def _cute_problem(v: Variant, dtype: torch.dtype | None) -> str | None:
    """Return why a CuTe DSL variant cannot run here with ``dtype`` (no GPU: it only compiles; neither the DSL nor
    an ahead-of-time build of it), or None."""
    if MODE != "gpu":
        return (f"{v.op}/{v.name}: CuTe DSL kernels need an NVIDIA GPU to run (the DSL has no CPU emulator); here "
                "it compiles for sm_90a: read its PTX, SASS and registers with workbench.inspect(...)")
    if not _has_cute():  # an ahead-of-time build (kernels/_cute_aot.py) runs without the DSL
        why = importlib.import_module(f"{KERNELS_PACKAGE}._cute_aot").problem(v.name, dtype)
        if why:
            return (f"{v.op}/{v.name}: the CuTe DSL is not installed in this Python (pip install "
                    f"nvidia-cutlass-dsl==4.8.1) and {why}")
    return None


@functools.cache
def _has_cute() -> bool:
    """Return True when the CuTe DSL (``cutlass``) is importable in this Python (looked up once, not imported)."""
    return importlib.util.find_spec("cutlass") is not None


@functools.cache
def _mentions_dot(source: Path | None) -> bool:
    """Return True when a variant's source file calls ``tl.dot`` (for the words of its bf16 refusal)."""
    try:
        return source is not None and "tl.dot(" in source.read_text()
    except OSError:
        return False


def _takes_dtype(fn: Callable) -> bool:
    """Return True when a ``supports`` function takes the dtype as a second argument: ``supports(shape, dtype)``."""
    try:
        params = list(_inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 and params[1].kind in (params[1].POSITIONAL_ONLY, params[1].POSITIONAL_OR_KEYWORD)


def register(op: str, name: str | None = None, *, backend: str, idea: str, gpu_only: bool = False,
             dtypes: Sequence[torch.dtype | str] | None = None, cu_file: str | Path | None = None,
             expected_diagnosis: str | None = None, supports: Callable[[dict], str | None] | None = None,
             inspect_spec: Callable[[], dict] | None = None, flops: Callable[..., float] | None = None,
             bytes: Callable[..., float] | None = None, gpu_note: str = "", bf16_dot: bool = True,
             cpu_limit: CpuLimit | None = None, alignment: int = 0,
             deterministic: bool | None = None) -> Callable:  # noqa: A002
    """Register the decorated function as a variant of ``op``; returns the :class:`Variant`.

    ``name`` defaults to the function name; the variant's source file is the function's file and ``cu_file``
    (relative to it) names the CUDA C source for backend ``"cuda"``. A Triton variant of a bfloat16 op is refused in
    cpu mode (the interpreter's bf16 ``tl.dot`` is garbage) unless ``bf16_dot=False`` says its dots never take bf16
    operands (moe_fp8: bf16 in and out, e4m3 dots on a GPU and exact fp16 ones in the interpreter).
    ``cpu_limit`` declares the largest problem it takes in cpu mode (:class:`CpuLimit`); ``alignment`` the byte
    boundary its launcher needs the inputs' data on (16 for 16-byte vector loads): a call with a misaligned input (a
    view into a larger buffer) hands the launcher an aligned copy. The op's ladder (:func:`teaching_order`) decides
    where it appears in :func:`variants`, not the order of registration. ``deterministic`` declares whether the same
    inputs give bitwise-identical outputs on every call (True), may not (False: atomics, lock order), or nothing
    (None).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
    if not idea or "\n" in idea:
        raise ValueError("idea must be one non-empty line")

    def deco(fn: Callable[..., torch.Tensor]) -> Variant:
        if op not in _OPS:
            raise KeyError(f"register the op contract {op!r} before its variants (known ops: {sorted(_OPS)})")
        src = Path(_inspect.getsourcefile(fn) or "")
        cu = (src.parent / cu_file) if cu_file is not None else None
        v = Variant(op=op, name=name or fn.__name__, backend=backend, idea=idea, fn=fn, gpu_only=gpu_only,
                    dtypes=tuple(as_dtype(d) for d in (dtypes or _OPS[op].dtypes)), source=src, cu_file=cu,
                    expected_diagnosis=expected_diagnosis, supports=supports, inspect_spec=inspect_spec,
                    flops_fn=flops, bytes_fn=bytes, gpu_note=gpu_note, bf16_dot=bf16_dot, cpu_limit=cpu_limit,
                    alignment=int(alignment), deterministic=deterministic)
        lst = _VARIANTS.setdefault(op, [])
        lst[:] = [x for x in lst if x.name != v.name]  # re-registering (module reload) replaces
        lst.append(v)
        return v

    return deco


def teaching_order(op: str, names: Sequence[str]) -> None:
    """Declare ``op``'s ladder: its variants' names in teaching order (baselines first, known-wrong kernels last).

    :func:`variants` lists them in this order whatever order their modules were imported in; a variant the ladder
    does not name (one a notebook registers) comes after the named ones, in registration order.
    """
    names = tuple(names)
    if len(set(names)) != len(names):
        raise ValueError(f"teaching_order({op!r}): a name appears twice in {list(names)}")
    _LADDERS[op] = names


def ladder(op: str) -> tuple[str, ...]:
    """Return the variant names ``op``'s ladder declares (empty when it declares none)."""
    get_op(op, with_variants=True)
    return _LADDERS.get(op, ())


def _in_order(op: str, vs: list[Variant]) -> list[Variant]:
    rank = {n: i for i, n in enumerate(_LADDERS.get(op, ()))}
    return sorted(vs, key=lambda v: rank.get(v.name, len(rank)))  # stable: unnamed ones keep registration order


def variants(op: str, *, include_wrong: bool = False, runnable: bool = False,
             backend: str | None = None) -> list[Variant]:
    """Return the variants of ``op`` in teaching order (the op's :func:`teaching_order`).

    Known-wrong kernels are left out unless ``include_wrong``; ``runnable`` keeps only those that run in this
    mode; ``backend`` filters by backend.
    """
    get_op(op, with_variants=True)
    out = [v for v in _in_order(op, _VARIANTS[op]) if include_wrong or not v.known_wrong]
    if runnable:
        out = [v for v in out if not (v.gpu_only and MODE != "gpu")]
    if backend is not None:
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
        out = [v for v in out if v.backend == backend]
    return out


def known_wrong(op: str) -> list[Variant]:
    """Return the deliberately wrong kernels of ``op`` (each names the diagnosis the checker must give)."""
    return [v for v in variants(op, include_wrong=True) if v.known_wrong]


def variant(op: str, name: str) -> Variant:
    """Return the variant ``name`` of ``op``, or raise naming the known variants."""
    for v in variants(op, include_wrong=True):
        if v.name == name:
            return v
    names = [v.name for v in variants(op, include_wrong=True)]
    raise KeyError(f"op {op!r} has no variant {name!r}: known variants are {names}")


def reference(op: str) -> Callable[..., torch.Tensor]:
    """Return the float64 reference of ``op`` (same call convention as its variants)."""
    return get_op(op).reference


def make_inputs(op: str, *, dtype: torch.dtype | str | None = None, seed: int = 0,
                device: torch.device | str | None = None, case: str = "random", **shape: Any) -> tuple:
    """Make fresh random inputs for ``op`` at ``shape`` (e.g. ``M=64, N=64, K=64``) as positional arguments.

    Keys listed in the op's ``call_kwargs`` (``causal``...) are not inputs: pass them to the call yourself
    (``make`` still sees them: attention_bwd's saved forward depends on ``causal``).
    ``dtype`` defaults to float32, or to the op's first dtype when it takes no float32 (moe_align: int32).
    ``case`` picks one of the op's input cases (``"random"``; softmax also has ``"edge"``: -inf, huge values).
    """
    from workbench import device as _device

    spec = get_op(op)
    sizes, kw = spec.split(shape)
    missing = [k for k in spec.shape_keys if k not in sizes]
    extra = [k for k in sizes if k not in spec.shape_keys]
    if missing or extra:
        raise OpError(f"make_inputs({op!r}): expected sizes {list(spec.shape_keys)}"
                      + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
    for k in spec.shape_keys:
        v = sizes[k]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise OpError(f"make_inputs({op!r}): size {k} must be an int, got {v!r} ({type(v).__name__})")
        if v < 0:
            raise OpError(f"make_inputs({op!r}): size {k} must be >= 0, got {v}")
    dt = as_dtype(dtype) if dtype is not None else (torch.float32 if torch.float32 in spec.dtypes else spec.dtypes[0])
    if dt not in spec.dtypes:
        raise OpError(f"{op} supports dtypes {[dtype_name(d) for d in spec.dtypes]}, not {dtype_name(dt)}")
    if case not in spec.cases and case not in spec.specials:
        known = list(dict.fromkeys((*spec.cases, *spec.specials)))
        raise OpError(f"{op} has input cases {known}, not {case!r}")
    dev = torch.device(device) if device is not None else _device()
    ints = {k: int(v) for k, v in sizes.items()}  # numpy ints too
    try:
        inputs = spec.make({**ints, **kw}, dt, seed, dev, case=case)
    except OpError:
        raise
    except (RuntimeError, ValueError, IndexError) as e:  # sizes the contract cannot take (top_k > E, ...)
        raise OpError(f"make_inputs({op!r}): cannot make inputs for {shape}: {type(e).__name__}: {e}") from e
    if spec.distributed:  # one tuple of inputs per rank
        for rank_inputs in inputs:
            spec.validate(*rank_inputs, **kw)
        return inputs
    spec.validate(*inputs, **kw)  # the contract's own checks (E >= 1, top_k <= E, ...), as every variant runs them
    return inputs
