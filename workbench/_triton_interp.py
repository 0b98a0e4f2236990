"""Fix and guard the Triton interpreter (cpu mode): patch-scope leaks, silent bfloat16 garbage, unchecked pointers.

Fixes and guards, all installed once by :func:`install` (``import workbench`` in cpu mode):

- **Patch scopes.** Triton 3.7's interpreter swaps ``triton.language``'s builtins for interpreter versions while a
  kernel runs and restores them afterwards, but a call of a ``@triton.jit`` *helper* (``tl.max``, ``tl.sum``,
  ``tl.cdiv``: device functions) patches them again and never restores them. The leaked patches break
  ``workbench.inspect``, which compiles Triton kernels for real in the same process. Restoring the helper call's
  own patch scope when it returns keeps nesting right.
- **Module names leaked into the kernel's globals.** To run a kernel whose source it rewrote, the interpreter
  copies every name of its own module that the kernel's globals lack into them (``FunctionRewriter``). For a kernel
  defined in a notebook those globals are ``__main__``'s, and ``__file__`` is among the names: ``__main__`` then
  claims to be ``triton/runtime/interpreter.py``, and every process started with ``spawn`` afterwards (the
  expert-parallel check's ranks) runs that file as its main module and dies of "attempted relative import with no
  known parent package". The double-underscore names it adds are removed again after each rewrite.
- **bfloat16.** numpy has no bfloat16, so the interpreter keeps bf16 values as raw ``uint16`` bit patterns and its
  arithmetic, comparisons, reductions and ``tl.dot`` on them return garbage silently (a bf16 ``tl.dot`` is off by
  ~1e10). Loads, stores and ``tl.where`` move the bits unchanged and are right. Every operation that would
  compute on bf16 values raises :class:`workbench.UnsupportedHere` naming the kernel and the operation instead.
- **bfloat16 casts round as a GPU's do.** The interpreter's float32 -> bf16 cast *truncates* (a GPU's
  ``.to(tl.bfloat16)`` rounds to nearest even, ``cvt.rn.bf16.f32``): an error of up to one bf16 ulp (2^-7
  relative) where the GPU's is half of one, enough to fail a tight check of a correct kernel. Its float64, integer
  -> bf16 and bf16 -> float64, integer casts convert the 16-bit patterns as integers: garbage. Every cast to or from
  bf16 now converts values and rounds once to nearest even, bit for bit as on the GPU (an explicit
  ``fp_downcast_rounding="rtz"`` still truncates).
- **Every launch is bounds-checked.** An unmasked (live) lane of a ``tl.load``/``tl.store``/atomic whose address
  lies outside the storage of every tensor passed to the launch raises :class:`workbench.cuda.errors.MemcheckError`
  naming the kernel, line, program and the argument it ran past, where the interpreter would read or write the
  host's memory: a SIGSEGV of the Python process, or heap corruption. A kernel that loads or casts pointers
  itself (an array of tensor addresses, as grouped GEMMs pass them) may address tensors it was not passed: once
  it does, such addresses are only refused when they are not mapped in this process.
- **memcheck.** While :func:`workbench._sanitize.sanitizing` is on (the checker turns it on around each kernel
  call), every ``tl.load``/``tl.store``/atomic checks its unmasked pointers against the tensors passed to the
  launch: an address outside all of them raises :class:`workbench.cuda.errors.MemcheckError` naming the kernel, the
  program, the argument it ran past and the element offset, where the interpreter would read garbage or corrupt
  the heap ("corrupted double-linked list", exit 134).
- **racecheck.** Under the same switch every element a launch touches remembers the program that last wrote it
  (and whether atomically) and the program that read it: a plain store to an element another program stored to or
  read, a load of an element another program stored to, or an atomic mixed with another program's plain access
  raises :class:`workbench.cuda.errors.RaceError`. Programs of one launch run in any order on a GPU (the
  interpreter runs them one after another, which hides the race): sharing an element across programs needs
  atomics. Within one program Triton orders accesses itself, so those never count.
- **counters.** Inside :func:`counting` every launch is counted into a :class:`TritonCounts`: the programs of its
  grid; the elements and bytes ``tl.load``/``tl.store``/atomics request (masked-off lanes excluded; a lane counts
  once per access, so a value loaded twice is counted twice), by tensor argument; ``tl.dot`` calls and their FLOPs
  (2*M*N*K each, the whole tile: padding lanes a mask zeroed are multiplied too, as on a GPU). Triton decides the
  per-thread layout and vector width itself, so these are the bytes a kernel asks for: they show its tiling and
  its reuse, not how its accesses coalesce into sectors.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_DONE = False


@dataclass
class _Buffer:
    """One tensor argument of a launch: its byte range and how to name it."""

    name: str
    lo: int
    hi: int
    itemsize: int
    numel: int
    dtype: str


@dataclass
class TritonCounts:
    """What one Triton launch asked of memory and of ``tl.dot`` under the interpreter (see :func:`counting`).

    Loads, stores and atomics count the lanes whose mask is on (``*_elements``) and their bytes; ``*_calls`` count
    the ``tl.load``/``tl.store``/atomic operations the programs executed (one per program per call, whatever the
    tile's size). ``by_arg`` splits the bytes by the tensor argument they address: {arg: {"load": bytes, "store":
    bytes, "atomic": bytes}}. Triton picks the vector width and thread layout of each access itself, so there are
    no requests or sectors here: only what the kernel requested.
    """

    kernel: str
    grid: tuple[int, int, int] = (0, 0, 0)
    load_calls: int = 0
    load_elements: int = 0
    load_bytes: int = 0
    store_calls: int = 0
    store_elements: int = 0
    store_bytes: int = 0
    atomic_calls: int = 0
    atomic_elements: int = 0
    atomic_bytes: int = 0
    dot_calls: int = 0
    dot_flops: int = 0
    by_arg: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def programs(self) -> int:
        """Return the number of programs the launch ran (the product of its grid)."""
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass
class _Launch:
    """The launch the interpreter is running: the kernel, and (when sanitizing or counting) its buffers."""

    kernel: str
    filename: str
    buffers: list[_Buffer] | None = None
    counts: TritonCounts | None = None
    checked: bool = False  # sanitizing: memcheck and racecheck every access
    foreign: bool = False  # the kernel made pointers from integers or loaded them: other tensors are reachable
    guard_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))  # argument storages, sorted
    guard_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    races: _Races = field(default_factory=lambda: _Races())  # racecheck: what each program did to each byte


_MANY = (-1, -1, -1)  # "read by more than one program"
_PAGE_BITS = 16  # racecheck tables cover 64 KiB of addresses each, made when a launch first touches them


@dataclass
class _RacePage:
    """Racecheck state of 2^_PAGE_BITS byte addresses: the last writer, whether atomically, the reader, the line.

    Programs are codes into :class:`_Races` ``progs`` (-1: none; a reader of -2: several programs); lines are codes
    into its ``lines`` (-1: no program touched the address yet).
    """

    writer: np.ndarray
    atomic: np.ndarray
    reader: np.ndarray
    line: np.ndarray

    @classmethod
    def empty(cls) -> _RacePage:
        n = 1 << _PAGE_BITS
        return cls(np.full(n, -1, np.int32), np.zeros(n, bool), np.full(n, -1, np.int32), np.full(n, -1, np.int32))


def _intern(codes: dict, items: list, item: Any) -> int:
    """Return the index of ``item`` in ``items``, appending it (and its index to ``codes``) when new."""
    c = codes.get(item)
    if c is None:
        c = codes[item] = len(items)
        items.append(item)
    return c


@dataclass
class _Races:
    """One launch's racecheck tables, by page, with the programs and source lines they name."""

    pages: dict[int, _RacePage] = field(default_factory=dict)
    progs: list[tuple] = field(default_factory=list)
    prog_codes: dict[tuple, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    line_codes: dict[str, int] = field(default_factory=dict)

    def code(self, prog: tuple) -> int:
        """Return the code of program ``prog``."""
        return _intern(self.prog_codes, self.progs, prog)

    def line_code(self, line: str) -> int:
        """Return the code of source line ``line``."""
        return _intern(self.line_codes, self.lines, line)

    def page(self, number: int) -> _RacePage:
        """Return the table of page ``number``, made empty on first use."""
        pg = self.pages.get(number)
        if pg is None:
            pg = self.pages[number] = _RacePage.empty()
        return pg

    def record(self, pg: _RacePage, i: int) -> list:
        """Return [writer, atomic, reader, line] of entry ``i`` of ``pg`` as programs and a line (for a report)."""
        w, r = int(pg.writer[i]), int(pg.reader[i])
        return [self.progs[w] if w >= 0 else None, bool(pg.atomic[i]),
                _MANY if r == -2 else self.progs[r] if r >= 0 else None, self.lines[int(pg.line[i])]]


_LAUNCH: contextvars.ContextVar[_Launch | None] = contextvars.ContextVar("wb_triton_launch", default=None)
_COUNTING: contextvars.ContextVar[list[TritonCounts] | None] = contextvars.ContextVar("wb_triton_counting",
                                                                                      default=None)


@contextlib.contextmanager
def counting() -> Iterator[list[TritonCounts]]:
    """Count every Triton launch the interpreter runs inside the block; yields the list their records go to.

    A launch's record is appended when the launch finishes (a launch that raises leaves none). Blocks nest: an
    inner block's launches are also appended to the outer block's list.
    """
    records: list[TritonCounts] = []
    outer = _COUNTING.get()
    token = _COUNTING.set(records)
    try:
        yield records
    finally:
        _COUNTING.reset(token)
        if outer is not None:
            outer.extend(records)


def install() -> None:
    """Install the patch-scope fix, the bfloat16 guard and the memcheck hooks into the interpreter (once)."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    try:
        from triton.runtime import interpreter as ti
    except ImportError:  # no triton: nothing to fix
        return
    _install_scope_fix(ti)
    _install_globals_fix(ti)
    _install_fast_paths(ti)
    if hasattr(ti, "GridExecutor") and hasattr(ti, "InterpreterBuilder"):
        _install_launch_context(ti)
        _install_bf16_guard(ti)
        _install_bf16_casts(ti)
        _install_memcheck(ti)
        _install_counters(ti)
        _install_pointer_casts(ti)
    from workbench import _triton_gate

    _triton_gate.install(ti)


# ---------------------------------------------------------------------------------------------------- patch scopes


def _install_scope_fix(ti: Any) -> None:
    if not (hasattr(ti, "_patch_lang") and hasattr(ti, "_LangPatchScope")
            and hasattr(ti.InterpretedFunction, "rewrite")):
        return  # another Triton version: leave it alone

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
        if _LAUNCH.get() is not None:
            return _call_rewritten(ti, self, args, kwargs)  # inside a launch, which patched both languages
        scope = ti._patch_lang(self.fn)
        try:
            return _call_rewritten(ti, self, args, kwargs)
        finally:
            scope.restore()

    __call__.__doc__ = "Call the device function under the interpreter, restoring triton.language afterwards."
    ti.InterpretedFunction.__call__ = __call__


def _call_rewritten(ti: Any, helper: Any, args: tuple, kwargs: dict) -> Any:
    """Run the interpreter's rewritten ``helper`` (a ``@triton.jit`` device function), wrapping its errors."""
    fn = helper.rewrite()
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raise ti.InterpreterError(repr(e)) from e


@functools.cache
def _both_languages() -> Any:
    """Return a stand-in function for ``_patch_lang`` whose globals hold triton.language and its core.

    A launch patches both once with it, and its helpers (any module's) run under that patch: patching again on every
    call cost about 0.2 ms of CPU per helper call per program (a quarter of a helper-heavy check's time).
    """
    import types

    import triton.language as tl

    return types.SimpleNamespace(__globals__={"tl": tl, "core": tl.core})


def _install_globals_fix(ti: Any) -> None:
    rewriter = getattr(ti, "FunctionRewriter", None)
    original = getattr(rewriter, "_compile_and_exec", None)
    if original is None:
        return  # another Triton version: leave it alone

    def _compile_and_exec(self: Any, transformed_ast: Any) -> Any:
        fn_globals = self.fn.__globals__
        before = {k for k in fn_globals if k.startswith("__")}
        try:
            return original(self, transformed_ast)
        finally:
            for k in [k for k in fn_globals if k.startswith("__") and k not in before]:
                del fn_globals[k]

    _compile_and_exec.__doc__ = "Run the rewritten kernel, then drop the dunder names the interpreter added."
    rewriter._compile_and_exec = _compile_and_exec


# ------------------------------------------------------------------------------------------------------ fast paths


def _install_fast_paths(ti: Any) -> None:
    """Replace three per-operation helpers of the interpreter with equivalents that do not redo constant work.

    Each launch patched every builtin of triton.language after listing the modules' members again (``inspect.
    getmembers``, sorted, about 300 attributes, four times); every patched builtin copied its keyword arguments into a
    new dict to drop ``_semantic``; and every numpy conversion built an 18-entry dtype table. Together about a tenth
    of a Triton check's CPU under the interpreter. The results are the same: the builtins are listed once, here,
    before any launch has patched them.
    """
    if not all(hasattr(ti, n) for n in ("_patch_builtin", "_patch_attr", "_get_np_dtype", "interpreter_semantic")):
        return  # another Triton version: leave it alone
    _fast_builtins(ti)
    _fast_np_dtype(ti)


def _fast_builtins(ti: Any) -> None:
    import inspect

    import triton.language as tl

    listed: dict[int, list[tuple[str, Any]]] = {}

    def builtins_of(pkg: Any) -> list[tuple[str, Any]]:
        if id(pkg) not in listed:
            listed[id(pkg)] = [(n, m) for n, m in inspect.getmembers(pkg) if tl.core.is_builtin(m)]
        return listed[id(pkg)]

    for pkg in (tl, tl.tensor, tl.math, tl.core, tl.core.tensor, tl.core.tensor_descriptor_base):
        builtins_of(pkg)  # listed now, while nothing is patched

    semantic = ti.interpreter_semantic

    def _patch_attr(obj: Any, name: str, member: Any, builder: Any, scope: Any) -> None:
        def patched(*args: Any, **kwargs: Any) -> Any:
            kwargs["_semantic"] = semantic  # replaces the caller's, as the original does
            return member(*args, **kwargs)

        scope.set_attr(obj, name, patched)

    def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        for name, member in builtins_of(pkg):
            _patch_attr(pkg, name, member, builder, scope)

    ti._patch_attr, ti._patch_builtin = _patch_attr, _patch_builtin


def _fast_np_dtype(ti: Any) -> None:
    import triton.language as tl

    original = ti._get_np_dtype
    scalars = {t: original(t) for t in (tl.int1, tl.float16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16,
                                         tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64, tl.bfloat16,
                                         tl.float8e5, tl.float8e5b16, tl.float8e4nv, tl.float8e4b8, tl.float8e4b15)}
    u64 = np.dtype(np.uint64)

    def _get_np_dtype(tt_dtype: Any) -> np.dtype:
        t = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(t, tl.pointer_type):
            return u64
        found = scalars.get(t)
        return found if found is not None else original(tt_dtype)  # the original's error for other types

    ti._get_np_dtype = _get_np_dtype


# -------------------------------------------------------------------------------------------------- launch context


def _ours(e: BaseException) -> BaseException | None:
    """Return the UnsupportedHere or SanitizerError an InterpreterError wraps (at any depth), or None."""
    from workbench.cuda.errors import SanitizerError
    from workbench.registry import UnsupportedHere

    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (UnsupportedHere, SanitizerError)):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _install_launch_context(ti: Any) -> None:
    """Wrap GridExecutor so each launch knows its kernel (and, when sanitizing, its buffers)."""
    call, init_args = ti.GridExecutor.__call__, ti.GridExecutor._init_args_hst

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
        code = getattr(self.fn, "__code__", None)
        launch = _Launch(kernel=getattr(self.fn, "__name__", "kernel"), filename=code.co_filename if code else "")
        records, profiling = _COUNTING.get(), _profiling()
        if records is not None or profiling:
            launch.counts = TritonCounts(kernel=launch.kernel)
        # Patch triton.language and its core for the whole launch: then the kernel's helpers, the standard library's
        # (tl.sum, tl.max: their module sees core) included, run without patching either again on every call.
        scope = ti._patch_lang(_both_languages())
        token = _LAUNCH.set(launch)
        try:
            out = call(self, *args, **kwargs)
            if records is not None:
                records.append(launch.counts)
            if profiling:
                _record(launch.counts)
            return out
        except ti.InterpreterError as e:
            inner = _ours(e)
            if inner is None:
                raise
            raise inner.with_traceback(inner.__traceback__) from None  # the learner sees the real error
        finally:
            _LAUNCH.reset(token)
            scope.restore()

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        launch = _LAUNCH.get()
        if launch is not None:
            from workbench import _sanitize

            launch.checked = _sanitize.active()
            named = list(zip(self.arg_names, args_hst, strict=False)) + list(kwargs_hst.items())
            _set_buffers(launch, named)  # every launch: the bounds guard needs them
        return args_hst, kwargs_hst

    __call__.__doc__ = "Run the launch with the workbench's launch context; re-raise its own errors unwrapped."
    ti.GridExecutor.__call__ = __call__
    ti.GridExecutor._init_args_hst = _init_args_hst


def _tensors(name: str, arg: Any) -> list[tuple[str, Any]]:
    """Return the (name, torch tensor) pairs inside one launch argument (a tensor, a wrapper, a tuple)."""
    if isinstance(arg, tuple):
        return [t for i, a in enumerate(arg) for t in _tensors(f"{name}[{i}]", a)]
    base = getattr(arg, "base", None)
    if base is not None and hasattr(base, "data_ptr") and hasattr(base, "untyped_storage"):  # TensorWrapper
        return _tensors(name, base)
    if hasattr(arg, "data_ptr") and hasattr(arg, "storage_offset") and hasattr(arg, "stride"):
        return [(name, arg)]
    return []


def _set_buffers(launch: _Launch, named: list[tuple[str, Any]]) -> None:
    """Record the byte range of every tensor argument: the span its view covers."""
    bufs = []
    for name, arg in named:
        for nm, t in _tensors(name, arg):
            if t.numel() == 0:
                continue
            span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
            lo = t.data_ptr() - sum((s - 1) * -st for s, st in zip(t.shape, t.stride(), strict=True) if st < 0) \
                * t.element_size()
            bufs.append(_Buffer(nm, lo, lo + span * t.element_size(), t.element_size(), t.numel(),
                                str(t.dtype).replace("torch.", "")))
    launch.buffers = bufs
    launch.lo = np.array([b.lo for b in bufs], dtype=np.uint64)
    launch.hi = np.array([b.hi for b in bufs], dtype=np.uint64)
    storages = sorted({(s.data_ptr(), s.data_ptr() + s.nbytes()) for _, arg in named for _, t in _tensors("", arg)
                       if (s := t.untyped_storage()).nbytes() > 0})
    launch.guard_lo = np.array([a for a, _ in storages], dtype=np.uint64)
    launch.guard_hi = np.array([b for _, b in storages], dtype=np.uint64)


# ---------------------------------------------------------------------------------------------------------- bf16


def _is_bf16(handle: Any) -> bool:
    # on every interpreted operation: a name test, not tl.dtype.__eq__ (the same test, through Python-level calls)
    ty = getattr(handle, "dtype", None)
    while hasattr(ty, "element_ty"):
        ty = ty.element_ty
    ty = getattr(ty, "scalar", ty)
    return getattr(ty, "name", None) == "bf16" and isinstance(ty, _tl_dtype())


@functools.cache
def _tl_dtype() -> type:
    import triton.language as tl

    return tl.dtype


def _refuse_bf16(what: str) -> None:
    from workbench.registry import UnsupportedHere

    launch = _LAUNCH.get()
    where = f"kernel {launch.kernel}" if launch is not None else "a Triton kernel"
    fix = ("Compute in float32 (x.to(tl.float32)) and cast back when you store, or check float16/float32 here"
           if what != "tl.dot" else "Check float16 or float32 here, and bfloat16 on a GPU")
    raise UnsupportedHere(
        f"{where}{_kernel_line(launch)}: {what} on bfloat16 values under the Triton interpreter (cpu mode) computes "
        f"garbage silently: numpy has no bfloat16, so the interpreter holds bf16 as raw 16-bit patterns. {fix}.")


def _install_bf16_guard(ti: Any) -> None:
    """Refuse every interpreter operation that would compute on bfloat16 bit patterns."""
    builder = ti.InterpreterBuilder
    binary, ternary, unary, fma, dot = (builder.binary_op, builder.ternary_op, builder.unary_op, builder.create_fma,
                                        builder.create_dot)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if _is_bf16(lhs) or _is_bf16(rhs):
            _refuse_bf16(f"arithmetic ({getattr(op, '__name__', 'a binary op')})")
        return binary(self, lhs, rhs, op)

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is not np.where and (_is_bf16(lhs) or _is_bf16(rhs) or _is_bf16(other)):  # where moves bits: fine
            _refuse_bf16(f"arithmetic ({getattr(op, '__name__', 'a ternary op')})")
        return ternary(self, lhs, rhs, other, op)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if _is_bf16(arg):
            _refuse_bf16(f"math ({getattr(op, '__name__', 'a unary op')})")
        return unary(self, arg, op)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if _is_bf16(x) or _is_bf16(y) or _is_bf16(z):
            _refuse_bf16("arithmetic (fma)")
        return fma(self, x, y, z)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any) -> Any:
        if _is_bf16(a) or _is_bf16(b):
            _refuse_bf16("tl.dot")
        return dot(self, a, b, d, *args)

    builder.binary_op, builder.ternary_op, builder.unary_op = binary_op, ternary_op, unary_op
    builder.create_fma, builder.create_dot = create_fma, create_dot
    for cls in (ti.ReduceOps, ti.ScanOps):
        _guard_reduce(cls)


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round values to bfloat16 once (nearest even, NaN kept) and return the bit patterns as uint16.

    Integers and float64 go through float64, where each is exact or rounds as the GPU's single conversion does.
    """
    import torch

    wide = values.dtype == np.float64 or values.dtype.kind in "iub"
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64 if wide else np.float32))
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    """Widen bfloat16 bit patterns (uint16) to their float32 values (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _install_bf16_casts(ti: Any) -> None:
    """Make every interpreter cast to or from bfloat16 convert values, rounding to nearest even as a GPU does."""
    import triton.language as tl

    builder = ti.InterpreterBuilder
    cast_impl, fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def convert(src: Any, dst_type: Any) -> Any:
        data, dst = src.data, dst_type.scalar
        if src.dtype.scalar == tl.bfloat16:
            data = _bf16_values(data)
        if dst == tl.bfloat16:
            return ti.TensorHandle(_bf16_bits(data), dst)
        return ti.TensorHandle(data.astype(ti._get_np_dtype(dst_type)), dst)  # bf16 -> float or int: by value

    def patched_cast(self: Any, src: Any, dst_type: Any) -> Any:
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return convert(src, dst_type)
        return cast_impl(self, src, dst_type)

    def patched_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        rtne = rounding_mode is None or rounding_mode == ti._ir.ROUNDING_MODE.RTNE
        if dst_type.scalar == tl.bfloat16 and rtne and src.data.dtype in (np.float16, np.float32, np.float64):
            return ti.TensorHandle(_bf16_bits(src.data), dst_type.scalar)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    builder.cast_impl, builder.create_fp_to_fp = patched_cast, patched_fp_to_fp


def _guard_reduce(cls: Any) -> None:
    apply_impl = cls.apply_impl

    def guarded(self: Any, input: Any) -> Any:  # noqa: A002
        if any(_is_bf16(getattr(t, "handle", None)) for t in input):
            _refuse_bf16("a reduction or scan (tl.sum, tl.max, tl.cumsum, ...)")
        return apply_impl(self, input)

    cls.apply_impl = guarded


# ------------------------------------------------------------------------------------------------------- memcheck


def _kernel_line(launch: _Launch | None) -> str:
    """Return ' (file:line)' of the kernel code running now, or ''.

    That is the innermost frame of the kernel's own source or of a ``@triton.jit`` helper it called (a helper in
    another file, as an exercise's, names its own line, not the kernel's call of it): the innermost frame outside
    Triton, numpy and this package, provided the kernel's frame encloses it.
    """
    if launch is None or not launch.filename:
        return ""
    f = sys._getframe(1)
    inner = None
    while f is not None:
        name = f.f_code.co_filename
        if name == launch.filename:
            at = inner or f
            return f" ({at.f_code.co_filename}:{at.f_lineno})"
        if inner is None and not name.startswith(_not_kernel_code()):
            inner = f
        f = f.f_back
    return ""


@functools.cache
def _not_kernel_code() -> tuple[str, ...]:
    """Return the path prefixes of frames that are no kernel's: Triton, numpy, this package, ``<string>``."""
    import os

    import numpy
    import triton

    return (*(os.path.dirname(m.__file__) + os.sep for m in (triton, numpy, sys.modules["workbench"])), "<")


def _check_access(kind: str, ptrs: Any, mask: Any) -> None:
    """Raise MemcheckError when a live lane of ``ptrs`` addresses memory outside every buffer of the launch.

    Every launch is checked against its arguments' storages (see :func:`_guard`); a sanitized (checked) launch
    against the spans of the tensors themselves, and racechecked.
    """
    launch = _LAUNCH.get()
    if launch is None or launch.buffers is None:
        return
    live = _live(ptrs, mask)
    if live.size == 0:
        return
    ty = ptrs.get_element_ty()
    size = np.uint64(max(1, ty.primitive_bitwidth // 8))
    if kind == "load" and _is_pointer(ty):
        launch.foreign = True  # a loaded pointer may address any tensor
    if not launch.checked:
        _guard(launch, kind, live, size)
        return
    inside = ((live[:, None] >= launch.lo[None, :]) & (live[:, None] + size <= launch.hi[None, :])).any(axis=1)
    if not inside.all():
        _raise_oob(launch, kind, live[~inside], int(size))
    _track(launch, kind, live)


def _guard(launch: _Launch, kind: str, live: np.ndarray, size: np.uint64) -> None:
    """Raise MemcheckError for live addresses outside every argument's storage (the host's memory, not a tensor)."""
    lo, hi = launch.guard_lo, launch.guard_hi
    if lo.size:
        first, last = live.min(), live.max() + size
        k = int(np.searchsorted(lo, first, side="right")) - 1
        if k >= 0 and last <= hi[k]:
            return  # the common case: the whole access inside one storage
        idx = np.searchsorted(lo, live, side="right").astype(np.int64) - 1
        inside = idx >= 0
        inside[inside] &= live[inside] + size <= hi[idx[inside]]
        bad, good = live[~inside], live[inside]
    else:
        bad, good = live, live[:0]
    if bad.size == 0:
        return
    if launch.foreign and _mapped(bad, int(size), writable=kind != "load"):
        return  # a pointer the kernel made or loaded: another tensor, as far as this process can tell
    near = _blame(launch, int(good[0]))[0] if good.size else None  # the lanes in bounds say which tensor it is
    _raise_oob(launch, kind, bad, int(size), near)


def _is_pointer(ty: Any) -> bool:
    import triton.language as tl

    return isinstance(getattr(ty, "scalar", ty), tl.pointer_type)


def _mapped(addrs: np.ndarray, size: int, writable: bool) -> bool:
    """Return whether every address (and ``size`` bytes after it) lies in a mapping of this process (per /proc)."""
    try:
        with open("/proc/self/maps") as f:
            rows = [line.split(maxsplit=2) for line in f]
    except OSError:
        return False
    spans = []
    for r in rows:
        a, b = r[0].split("-")
        if r[1].startswith("r") and (not writable or r[1][1] == "w"):
            spans.append((int(a, 16), int(b, 16)))
    spans.sort()
    starts = np.array([a for a, _ in spans], dtype=np.uint64)
    ends = np.array([b for _, b in spans], dtype=np.uint64)
    idx = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
    return bool((idx >= 0).all() and (addrs + np.uint64(size) <= ends[idx]).all())


def _install_pointer_casts(ti: Any) -> None:
    """Note in the launch when the kernel turns integers into pointers (then other tensors are reachable)."""
    builder = ti.InterpreterBuilder
    bitcast, int_to_ptr = builder.create_bitcast, builder.create_int_to_ptr

    def create_bitcast(self: Any, src: Any, dst_type: Any) -> Any:
        _note_foreign(dst_type)
        return bitcast(self, src, dst_type)

    def create_int_to_ptr(self: Any, src: Any, dst_type: Any) -> Any:
        _note_foreign(dst_type)
        return int_to_ptr(self, src, dst_type)

    builder.create_bitcast, builder.create_int_to_ptr = create_bitcast, create_int_to_ptr


def _note_foreign(dst_type: Any) -> None:
    launch = _LAUNCH.get()
    if launch is not None and _is_pointer(dst_type):
        launch.foreign = True


def _program() -> tuple[int, int, int]:
    from triton.runtime import interpreter as ti

    return tuple(int(i) for i in (ti.interpreter_builder.grid_idx or (0, 0, 0)))


def _track(launch: _Launch, kind: str, addrs: np.ndarray) -> None:
    """Record this program's accesses to ``addrs``; raise RaceError when another program's access conflicts.

    Per byte address, in lockstep with the other programs of the launch: a load conflicts with another program's
    plain store (RAW); a store with another program's store (WAW) or load (WAR); an atomic with another program's
    plain store (WAW) or load (WAR). The lowest conflicting address is reported.
    """
    races, prog = launch.races, _program()
    p = races.code(prog)
    line = -1
    u = np.unique(addrs)
    numbers = u >> np.uint64(_PAGE_BITS)
    cuts = np.flatnonzero(numbers[1:] != numbers[:-1]) + 1
    for part in np.split(u, cuts) if cuts.size else (u,):
        pg = races.page(int(part[0]) >> _PAGE_BITS)
        i = (part & np.uint64((1 << _PAGE_BITS) - 1)).astype(np.intp)
        hazard, first = _hazards(pg, i, kind, p)
        if first is not None:
            _raise_race(launch, kind, int(part[first]), prog, hazard, races.record(pg, int(i[first])))
        if line < 0 and (kind != "load" or (pg.line[i] < 0).any()):
            line = races.line_code(_kernel_line(launch).strip(" ()"))
        _apply(pg, i, kind, p, line)


def _hazards(pg: _RacePage, i: np.ndarray, kind: str, p: int) -> tuple[str, int | None]:
    """Return (the hazard, the index into ``i`` of its lowest address) of program ``p``'s ``kind`` access, or None."""
    w = pg.writer[i]
    other_wrote = (w >= 0) & (w != p)
    plain_other_write = other_wrote & ~pg.atomic[i]
    if kind == "load":
        return "RAW", (int(np.argmax(plain_other_write)) if plain_other_write.any() else None)
    r = pg.reader[i]
    other_read = (r != -1) & (r != p)
    waw = other_wrote if kind == "store" else plain_other_write
    any_hazard = waw | other_read
    if not any_hazard.any():
        return "", None
    k = int(np.argmax(any_hazard))
    return ("WAW" if waw[k] else "WAR"), k


def _apply(pg: _RacePage, i: np.ndarray, kind: str, p: int, line: int) -> None:
    """Record program ``p``'s ``kind`` access of entries ``i`` (no hazard among them); ``line``: its line's code."""
    if kind == "load":
        r = pg.reader[i]
        pg.reader[i] = np.where((r == -1) | (r == p), p, -2)
        fresh = i[pg.line[i] < 0]
        pg.line[fresh] = line
        return
    pg.atomic[i] = (kind == "atomic") | (pg.atomic[i] & (pg.writer[i] == p))
    pg.writer[i] = p
    pg.line[i] = line


def _raise_race(launch: _Launch, kind: str, addr: int, prog: tuple, hazard: str, rec: list) -> None:
    from workbench.cuda.errors import RaceError

    buf, off = _blame(launch, addr)
    what = f"{buf.name} + {off}" if buf is not None else hex(addr)
    first = rec[0] if hazard in ("RAW", "WAW") else rec[2]
    first_s = "several programs" if first == _MANY else f"program {first}"
    did = {"RAW": "stored to", "WAW": "stored to", "WAR": "read"}[hazard]
    verb = {"load": "reads", "store": "stores to", "atomic": "atomically updates"}[kind]
    line = _kernel_line(launch)
    record = {"kernel": launch.kernel, "hazard": hazard, "arg": buf.name if buf else None, "offset": off,
              "first": {"program": first, "line": rec[3]},
              "second": {"program": prog, "line": line.strip(" ()"), "access": kind}}
    msg = (f"racecheck: {hazard} hazard in Triton kernel {launch.kernel}: program {prog} {verb} {what}{line}, which "
           f"{first_s} {did} ({rec[3]}) in the same launch. Programs of one launch run in any order on a GPU: an "
           "element several programs write needs tl.atomic_* (or one owner), and a value one program writes cannot "
           "be read by another in the same launch.")
    raise RaceError(msg, [record], 1)


def _blame(launch: _Launch, addr: int) -> tuple[_Buffer | None, int]:
    """Return the buffer ``addr`` most likely ran past (the nearest below, else above) and the element offset."""
    below = [b for b in launch.buffers or [] if b.lo <= addr]
    if below:
        b = max(below, key=lambda b: b.lo)
    elif launch.buffers:
        b = min(launch.buffers, key=lambda b: b.lo)
    else:
        return None, 0
    return b, (addr - b.lo) // b.itemsize


def _raise_oob(launch: _Launch, kind: str, bad: np.ndarray, size: int, near: _Buffer | None = None) -> None:
    """Raise MemcheckError for the addresses ``bad``; ``near``: the tensor the access's other lanes hit, if any."""
    from workbench.cuda.errors import MemcheckError

    program = _program()
    records = []
    for addr in sorted({int(a) for a in bad})[:8]:
        buf, off = _blame(launch, addr) if near is None else (near, (addr - near.lo) // near.itemsize)
        records.append({"kernel": launch.kernel, "program": program, "access": kind, "size": size,
                        "arg": buf.name if buf else None, "offset": off,
                        "numel": buf.numel if buf else None, "line": _kernel_line(launch).strip(" ()")})
    first = records[0]
    if first["arg"] is not None:
        n_el = first["numel"]
        what = f"{first['arg']} + {first['offset']} (element offset; {first['arg']} holds {n_el} element" + \
            ("s)" if n_el != 1 else ")")
    else:
        what = f"address {hex(int(bad[0]))} (the launch has no tensor arguments)"
    n = int(bad.size)
    msg = (f"memcheck: out-of-bounds {kind} in Triton kernel {launch.kernel}{_kernel_line(launch)}, program "
           f"{program}: {n} lane{'s' if n != 1 else ''} address memory outside every tensor passed to the launch; "
           f"first at {what}. Mask the access (mask=offs < n) or fix the index.")
    raise MemcheckError(msg, records, n)


def _install_memcheck(ti: Any) -> None:
    """Check the pointers of every masked load/store and atomic against the launch's buffers (when sanitizing)."""
    builder = ti.InterpreterBuilder
    load, store, rmw, cas = (builder.create_masked_load, builder.create_masked_store, builder.create_atomic_rmw,
                             builder.create_atomic_cas)

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *args: Any) -> Any:
        _check_access("load", ptrs, mask)
        _count_access("load", ptrs, mask)
        return load(self, ptrs, mask, *args)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        _check_access("store", ptrs, mask)
        _count_access("store", ptrs, mask)
        return store(self, ptrs, value, mask, *args)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any) -> Any:
        _check_access("atomic", ptr, mask)
        _count_access("atomic", ptr, mask)
        return rmw(self, op, ptr, val, mask, *args)

    def create_atomic_cas(self: Any, ptr: Any, *args: Any) -> Any:
        _check_access("atomic", ptr, None)
        _count_access("atomic", ptr, None)
        return cas(self, ptr, *args)

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas


# ------------------------------------------------------------------------------------------------------- counters


def _live(ptrs: Any, mask: Any) -> np.ndarray:
    """Return the addresses of the lanes of ``ptrs`` whose mask is on (all of them without a mask), flattened."""
    p = np.asarray(ptrs.data, dtype=np.uint64)
    if mask is None:
        return p.reshape(-1)
    return p[np.broadcast_to(np.asarray(mask.data, dtype=bool), p.shape)]


def _count_access(kind: str, ptrs: Any, mask: Any) -> None:
    """Add one load/store/atomic of the running launch to its counts (when counting): live lanes, bytes, by argument."""
    launch = _LAUNCH.get()
    if launch is None or launch.counts is None:
        return
    live = _live(ptrs, mask)
    size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    c = launch.counts
    setattr(c, f"{kind}_calls", getattr(c, f"{kind}_calls") + 1)
    if live.size == 0:
        return
    setattr(c, f"{kind}_elements", getattr(c, f"{kind}_elements") + int(live.size))
    setattr(c, f"{kind}_bytes", getattr(c, f"{kind}_bytes") + int(live.size) * size)
    for name, n in _by_buffer(launch, live).items():
        per = c.by_arg.setdefault(name, {"load": 0, "store": 0, "atomic": 0})
        per[kind] += n * size


def _by_buffer(launch: _Launch, live: np.ndarray) -> dict[str, int]:
    """Return how many of the addresses ``live`` fall in each tensor argument of the launch ('(other)': in none)."""
    bufs = launch.buffers or []
    if not bufs:
        return {"(other)": int(live.size)}
    order = np.argsort(launch.lo, kind="stable")
    lo, hi = launch.lo[order], launch.hi[order]
    idx = np.searchsorted(lo, live, side="right").astype(np.int64) - 1  # the buffer starting last at or below
    inside = idx >= 0
    inside[inside] &= live[inside] < hi[idx[inside]]
    out: dict[str, int] = {}
    counts = np.bincount(idx[inside], minlength=len(bufs))
    for k in np.nonzero(counts)[0]:
        name = bufs[int(order[k])].name
        out[name] = out.get(name, 0) + int(counts[k])
    outside = int(live.size - inside.sum())
    if outside:
        out["(other)"] = outside
    return out


def _install_counters(ti: Any) -> None:
    """Count the grid of each launch and the calls and FLOPs of ``tl.dot`` (loads and stores: see memcheck's hooks)."""
    builder = ti.InterpreterBuilder
    set_grid_dim, dot = builder.set_grid_dim, builder.create_dot

    def counted_set_grid_dim(self: Any, nx: int, ny: int, nz: int) -> Any:
        launch = _LAUNCH.get()
        if launch is not None and launch.counts is not None:
            launch.counts.grid = (int(nx), int(ny), int(nz))
        return set_grid_dim(self, nx, ny, nz)

    def counted_dot(self: Any, a: Any, b: Any, d: Any, *args: Any) -> Any:
        launch = _LAUNCH.get()
        if launch is not None and launch.counts is not None:
            sa, sb = np.shape(a.data), np.shape(b.data)
            launch.counts.dot_calls += 1
            launch.counts.dot_flops += 2 * int(np.prod(sa[:-1], dtype=np.int64)) * int(sa[-1]) * int(sb[-1])
        return dot(self, a, b, d, *args)

    builder.set_grid_dim, builder.create_dot = counted_set_grid_dim, counted_dot


def _profiling() -> bool:
    """Return whether a ``wb.profile`` call is counting launches now."""
    from workbench import profile_counters as _profile

    return _profile.active()


TRITON_METRICS = {  # TritonCounts field -> profile metric key (declared in workbench.profile_metrics)
    "programs": "triton__programs.sum",
    "load_calls": "triton__load_calls.sum",
    "load_elements": "triton__load_elements.sum",
    "load_bytes": "wb__global_load_bytes.sum",
    "store_calls": "triton__store_calls.sum",
    "store_elements": "triton__store_elements.sum",
    "store_bytes": "wb__global_store_bytes.sum",
    "atomic_elements": "wb__global_atomics.sum",
    "dot_calls": "triton__dot_calls.sum",
    "dot_flops": "triton__dot_flops.sum",
}


def _record(c: TritonCounts) -> None:
    """Hand one counted launch to wb.profile."""
    from workbench import profile_counters as _profile

    metrics = {key: getattr(c, f) for f, key in TRITON_METRICS.items()}
    _profile.record_launch(c.kernel, "triton", grid=c.grid, block=None, metrics=metrics)
