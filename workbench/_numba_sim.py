"""Hook Numba's CUDA simulator: poisoned shared memory always, memcheck, racecheck and initcheck under sanitizing.

Always (cpu mode): every block gets its own shared memory, filled with a poison pattern, as on a GPU where shared
memory starts as whatever the last kernel left there. The pattern is 0x7FFF in every 16-bit half-word: a NaN in
float16, float32 and float64, and a large garbage value (0x7FFF7FFF = 2147450879 for int32) in integers, so a
kernel that reads shared memory nobody wrote gets NaN or nonsense in its output instead of a lucky zero. Local
arrays start poisoned the same way. Each ``cuda.shared.array`` call site is its own array (the stock simulator
keyed arrays by source line, so two calls on one line aliased each other).

Also always: a kernel that reaches ``numba.cuda`` through a closure cell (GPU-Puzzles' ``cuda.jit(puzzle(cuda))``)
or as ``numba.cuda`` sees the running launch's ``threadIdx``, ``shared``, ``syncthreads`` and the rest
(:func:`_patch_module`); a launch a GPU's driver refuses (more threads per block than the sm_90 arch table allows,
a block z over 64, a zero or float dimension, shared memory over the 48 KB a Numba launch gets) raises a
``LaunchConfigError`` naming the kernel (:func:`check_launch`); ``cuda.shfl_*_sync`` and the other warp intrinsics,
which the simulator lacks, raise ``GpuOnlyError``; and before its first launch per signature a kernel must pass
Numba's real CUDA compiler (:mod:`workbench._numba_gate`, ``WORKBENCH_FRONTEND=0`` skips it). A negative index
wraps, as Numba's sm_90 code does too (it adds the extent when the index is below zero).

Under :func:`workbench._sanitize.sanitizing` (the checker turns it on around every kernel call) a launch runs
checked, as compute-sanitizer would run it on a GPU:

- memcheck: an index outside an array's shape (shared, local or global; negative indices too, which numpy would
  wrap) is recorded with the thread, block and source line; the access is dropped (a read gives poison) and the
  launch ends with :class:`~workbench.cuda.errors.MemcheckError`.
- racecheck: two threads of a block touch the same shared or global element between the same two
  ``cuda.syncthreads()``, at least one writes and neither through ``cuda.atomic.*``; or threads of two blocks
  touch the same global element non-atomically and at least one writes (blocks are never ordered). The launch ends
  with :class:`~workbench.cuda.errors.RaceError`. The verdict comes from barrier epochs and per-thread program
  order, never from how the OS threads happened to interleave, so a kernel whose accesses do not depend on the
  raced values gets the same report on every run: a hazard is RAW when, in lockstep program order (the k-th
  access of one thread against the k-th of another since the barrier), the write comes first, WAR when the read
  does, WAW for two writes.
- initcheck: a read of a shared element that no thread wrote before the last barrier and the reading thread did not
  write itself ends the launch with :class:`~workbench.cuda.errors.UninitializedError`.

One launch raises one error: memcheck before racecheck before initcheck (its message mentions the others). It
carries ``records`` (dicts shaped like the CPU engine's: ``tool``, ``kernel``, ``space``, ``array``, ``index``,
``block``, ``thread``, ``file``, ``line``; races ``hazard``, ``scope`` and the ``first`` and ``second`` access),
``total`` and ``reports`` (``{tool: (records, total)}`` for all three tools).

Inside :func:`workbench.profile` a launch is counted instead (:class:`_ProfileSession`): the same per-thread logs
are grouped, at each barrier, into warp-level requests (the lanes of a warp by access site and its n-th execution),
and counted as the CUDA C engine counts them: global requests and 32-byte sectors (from each array's allocation
start), shared-memory wavefronts and bank conflicts (32 banks of 4 bytes; 8-byte accesses per half-warp, 16-byte
per quarter-warp), atomics and barriers. Out-of-bounds accesses still raise MemcheckError there.

Cost: every shared/global element access appends to its thread's log (no lock); the logs are analysed when the
block passes each barrier. A checked launch takes about 2x an unchecked one (the shared-memory SGEMM at 64^3 or an
access-bound loop; measured on 2 busy cores), and nothing is logged outside ``sanitizing()``.

The hooks patch the simulator of numba-cuda (``numba.cuda.simulator``) right after it is imported and check first
that the internals they rely on are there, raising :class:`SimulatorChanged` with what changed if not.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import inspect
import linecache
import numbers
import operator
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

TESTED_NUMBA_CUDA = "0.30.4"  # the numba-cuda release these hooks were written and tested against
_KERNEL_MOD = "numba.cuda.simulator.kernel"
_API_MOD = "numba.cuda.simulator.kernelapi"

# Poison: 0x7FFF per 16-bit half-word (NaN for every float width, garbage for integers); booleans read True.
POISON_HALF = 0x7FFF
_POISON_BYTES = np.frombuffer(np.array([POISON_HALF], dtype=np.uint16).tobytes(), dtype=np.uint8)

MAX_RECORDS = 100  # records kept per tool (the smallest by space, array, index, block, thread): totals count all
_MAX_OOB = 10_000  # out-of-bounds accesses after which the launch stops (a loop running off an array)

ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas")


class SimulatorChanged(RuntimeError):
    """numba-cuda's CUDA simulator no longer has the internals the workbench's hooks patch."""


# ------------------------------------------------------------------------------------------------------ poison
def poison_(a: np.ndarray) -> np.ndarray:
    """Fill ``a`` in place with the shared-memory poison (0x7FFF half-words; booleans True) and return it."""
    if not a.flags.c_contiguous:
        raise ValueError("poison_: expected a C-contiguous array (the pattern is written through a byte view)")
    if a.dtype == np.bool_:
        a.fill(True)
    elif a.size:
        raw = a.reshape(-1).view(np.uint8)
        raw[:] = np.resize(_POISON_BYTES, raw.size)
    return a


def is_poison(a: Any) -> np.ndarray:
    """Return a bool mask of the elements of a numpy array that hold the shared-memory poison bit pattern."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_ or a.dtype.itemsize < 2 or a.dtype.itemsize % 2:
        raise TypeError(f"is_poison: the poison pattern is defined per 16-bit half-word, got dtype {a.dtype}")
    halves = a.view(np.uint16).reshape(a.shape + (a.dtype.itemsize // 2,))
    return np.all(halves == POISON_HALF, axis=-1)


def _poisoned(shape: Any, dtype: np.dtype) -> np.ndarray:
    return poison_(np.empty(shape, dtype))


def _poisoned_bytes(n: int) -> np.ndarray:
    return np.resize(_POISON_BYTES, n).view(np.byte) if n else np.zeros(0, np.byte)


def _scalar_poison(dtype: np.dtype) -> Any:
    """Return what an out-of-bounds read gives under memcheck: NaN for floats, 0 for integers (a safe index)."""
    if dtype.kind in "fc":
        return dtype.type("nan")
    return dtype.type(0)


# ---------------------------------------------------------------------------------------------------- arming
class _PostImport(importlib.abc.MetaPathFinder):
    """Install the hooks right after ``numba.cuda.simulator.kernel`` is executed (once, then step aside)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _KERNEL_MOD:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            install()

        spec.loader.exec_module = exec_module
        return spec


def arm() -> None:
    """Install the hooks now if the simulator is loaded, else as soon as it is (numba need not be imported)."""
    if _KERNEL_MOD in sys.modules:
        install()
    elif not any(isinstance(f, _PostImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImport())


_INSTALLED = False


def installed() -> bool:
    """Return whether the simulator is hooked in this process."""
    return _INSTALLED


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("numba-cuda")
    except Exception:  # noqa: BLE001
        return "unknown"


def _params(fn: Any) -> list[str]:
    return [p.name if p.kind is not p.VAR_POSITIONAL else "*" + p.name
            for p in inspect.signature(fn).parameters.values()]


def _expectations(kmod: Any, api: Any) -> list[tuple[str, Callable[[], bool]]]:
    """List what the hooks rely on in the simulator, each with a test that it is still so."""
    k, bm, bt = kmod.FakeCUDAKernel, kmod.BlockManager, kmod.BlockThread
    at, mod = api.FakeCUDAAtomic, api.FakeCUDAModule
    sh = getattr(api.FakeCUDAShared, "_wb_original", api.FakeCUDAShared)  # the simulator's own, once patched
    lo = getattr(api.FakeCUDALocal, "_wb_original", api.FakeCUDALocal)
    exp = [
        ("FakeCUDAKernel.__call__(self, *args)", lambda: _params(k.__call__) == ["self", "*args"]),
        ("FakeCUDAKernel sets fn, _device, grid_dim, block_dim",
         lambda: {"fn", "_device", "grid_dim", "block_dim"} <= set(k.__init__.__code__.co_names)),
        ("BlockManager.run(self, grid_point, *args)", lambda: _params(bm.run) == ["self", "grid_point", "*args"]),
        ("BlockManager keeps _block_dim, _f", lambda: {"_block_dim", "_f"} <= set(bm.__init__.__code__.co_names)),
        ("FakeCUDAKernel.__getitem__(self, configuration)",
         lambda: _params(getattr(k.__getitem__, "_wb_original", k.__getitem__)) == ["self", "configuration"]),
        ("BlockThread.syncthreads(self)", lambda: _params(bt.syncthreads) == ["self"]),
        ("BlockThread sets thread_id, blockIdx, threadIdx",
         lambda: {"thread_id", "blockIdx", "threadIdx"} <= set(bt.__init__.__code__.co_names)),
        ("kernel._get_kernel_context()", lambda: callable(getattr(kmod, "_get_kernel_context", None))),
        ("FakeCUDAShared(dynshared_size)", lambda: _params(sh.__init__) == ["self", "dynshared_size"]),
        ("FakeCUDAShared.array(self, shape, dtype, alignment)",
         lambda: _params(sh.array) == ["self", "shape", "dtype", "alignment"]),
        ("FakeCUDAShared keeps _allocations, _dynshared, _dynshared_size",
         lambda: {"_allocations", "_dynshared", "_dynshared_size"} <= set(sh.__init__.__code__.co_names)),
        ("FakeCUDALocal.array(self, shape, dtype, alignment)",
         lambda: _params(lo.array) == ["self", "shape", "dtype", "alignment"]),
        ("FakeCUDAModule builds FakeCUDAShared and FakeCUDALocal by name",
         lambda: {"FakeCUDAShared", "FakeCUDALocal"} <= set(mod.__init__.__code__.co_names)),
        ("FakeCUDAModule.shared / .local / .atomic properties",
         lambda: all(isinstance(getattr(mod, n, None), property) for n in ("shared", "local", "atomic"))),
        ("FakeCUDAAtomic.compare_and_swap(self, array, old, val)",
         lambda: _params(at.compare_and_swap) == ["self", "array", "old", "val"]),
        ("kernelapi.numpy_support.as_dtype and kernelapi.types.Type",
         lambda: hasattr(api.numpy_support, "as_dtype") and hasattr(api.types, "Type")),
    ]
    for name in ATOMICS:
        exp.append((f"FakeCUDAAtomic.{name}(self, array, index, ...)",
                    lambda n=name: _params(getattr(at, n))[:3] == ["self", "array", "index"]))
    return exp


def _check_internals(kmod: Any, api: Any) -> None:
    """Raise :class:`SimulatorChanged` naming every internal the hooks need that is missing or different."""
    missing = []
    for what, ok in _expectations(kmod, api):
        try:
            good = ok()
        except Exception:  # noqa: BLE001  (a missing attribute, a signature that cannot be read)
            good = False
        if not good:
            missing.append(what)
    if missing:
        raise SimulatorChanged(
            f"workbench: the CUDA simulator of numba-cuda {_version()} changed: {'; '.join(missing)}. "
            f"workbench/_numba_sim.py patches it (poisoned shared memory, memcheck/racecheck/initcheck) and was "
            f"written for numba-cuda {TESTED_NUMBA_CUDA}: install numba-cuda=={TESTED_NUMBA_CUDA} (pyproject.toml "
            "pins it) or update the hooks.")


def install() -> None:
    """Patch the loaded simulator (once): poisoned per-block shared memory, local arrays, checked launches."""
    global _INSTALLED
    if _INSTALLED:
        return
    kmod, api = sys.modules[_KERNEL_MOD], sys.modules.get(_API_MOD)
    if api is None:
        import importlib

        api = importlib.import_module(_API_MOD)
    _check_internals(kmod, api)
    _patch_memory(kmod, api)
    _patch_launch(kmod)
    _patch_config(kmod)
    _patch_atomics(api.FakeCUDAAtomic)
    _patch_module(kmod)
    _INSTALLED = True


# ----------------------------------------------------------------------- cuda.* through a captured module object
def _patch_module(kmod: Any) -> None:
    """Make ``numba.cuda.threadIdx`` (and every other in-kernel name) answer inside a running simulated kernel.

    The simulator swaps the kernel's globals that are ``numba.cuda`` for its per-launch module; a kernel that
    reached ``numba.cuda`` another way (a closure cell, as GPU-Puzzles writes ``def map_test(cuda): def call(out,
    a): ... cuda.threadIdx.x``, or ``numba.cuda.threadIdx`` through a global ``numba``) got "module 'numba.cuda' has
    no attribute 'threadIdx'". A module ``__getattr__`` (only consulted for names the module lacks) forwards those
    names to the launch's module while one runs; per-thread values (threadIdx, blockIdx, laneid) are read from the
    running OS thread there, so every simulated thread sees its own.
    """
    mod = sys.modules.get("numba.cuda")
    if mod is None or getattr(getattr(mod, "__getattr__", None), "_wb_forward", False):
        return
    previous = getattr(mod, "__getattr__", None)

    def __getattr__(name: str) -> Any:  # noqa: N807
        ctx = kmod._get_kernel_context() if not name.startswith("_") else None
        if ctx is not None:
            try:
                return getattr(ctx, name)
            except AttributeError:
                pass
        if previous is not None:
            return previous(name)
        hint = " (it exists inside a running kernel only)" if hasattr(kmod.FakeCUDAModule, name) or name in (
            "gridDim", "blockDim") else ""
        raise AttributeError(f"module 'numba.cuda' has no attribute {name!r}{hint}")

    __getattr__._wb_forward = True  # type: ignore[attr-defined]
    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]

    def gpu_only(self: Any, name: str) -> Any:
        if name in WARP_INTRINSICS:
            from workbench.cuda.errors import GpuOnlyError

            raise GpuOnlyError(
                f"cuda.{name}: the Numba CUDA simulator has no warp-level intrinsics (shuffles, votes, syncwarp, "
                "masks), so this kernel runs on a GPU only. In cpu mode, reduce through cuda.shared.array with "
                "cuda.syncthreads(), or write the kernel in CUDA C (the CPU engine runs warp shuffles)")
        raise AttributeError(f"'FakeCUDAModule' object has no attribute {name!r}")

    kmod.FakeCUDAModule.__getattr__ = gpu_only


# numba.cuda's warp-level device functions, which Numba's CUDA compiler accepts and its simulator lacks
WARP_INTRINSICS = frozenset({"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
                             "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync", "activemask",
                             "lanemask_lt", "syncwarp"})


# ------------------------------------------------------------------------------------------ launch configuration
REFERENCE_ARCH = "sm_90"  # the GPU whose limits a simulated launch must respect (H100/H200)
# Per-dimension limits of every compute capability since 3.0 (CUDA Programming Guide, "Technical Specifications"):
# the arch table holds the per-block totals, these are the same on every architecture it lists.
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)


_ERROR_CLS: type | None = None


def launch_config_error() -> type:
    """Return the class of a refused simulated launch: a ``LaunchConfigError`` that is also a ``TypeError``.

    Made on first use (``workbench.cuda`` imports the mode module, which imports this one before it is ready);
    a ``TypeError`` too because Numba's own check raises one for non-integer dimensions.
    """
    global _ERROR_CLS
    if _ERROR_CLS is None:
        from workbench.cuda.errors import LaunchConfigError

        class SimLaunchConfigError(LaunchConfigError, TypeError):
            """A simulated Numba launch a GPU would refuse (block, grid or shared-memory size)."""

        SimLaunchConfigError.__module__, SimLaunchConfigError.__qualname__ = __name__, "SimLaunchConfigError"
        _ERROR_CLS = SimLaunchConfigError
    return _ERROR_CLS


def _refuse(msg: str) -> Exception:
    return launch_config_error()(msg)


def _limits() -> Any:
    from workbench.cuda import arch

    return arch.get(REFERENCE_ARCH)


def _dims(kernel: str, what: str, v: Any) -> tuple[int, int, int]:
    """Return ``v`` (an int or 1-3 ints) as three ints >= 1, else raise SimLaunchConfigError naming ``kernel``."""
    t = list(v) if isinstance(v, (tuple, list)) else [v]
    if not 1 <= len(t) <= 3 or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in t):
        raise _refuse(f"kernel '{kernel}': the {what} must be an int or a tuple of 1 to 3 ints, got "
                                   f"{v!r} (a GPU launch takes whole numbers: use // or int(), not /)")
    dims = tuple(int(x) for x in t) + (1,) * (3 - len(t))
    if any(x < 1 for x in dims):
        raise _refuse(f"kernel '{kernel}': every {what} dimension must be >= 1, got {tuple(t)} "
                                   "(an empty launch is refused by the CUDA driver, not skipped)")
    return dims  # type: ignore[return-value]


def check_launch(kernel: str, grid: Any, block: Any, dynamic_smem: int = 0) -> tuple[tuple, tuple]:
    """Check a launch as the CUDA driver would on the reference GPU; return (grid, block) as 3-tuples.

    Refused: more threads per block than the arch table's ``max_threads_per_block``, a block dimension over
    (1024, 1024, 64), a grid dimension over (2^31-1, 65535, 65535), a zero, negative or non-integer dimension, and
    more dynamic shared memory than a launch gets without opting in (Numba never opts in).
    """
    L = _limits()
    g, b = _dims(kernel, "grid", grid), _dims(kernel, "block", block)
    nthr = b[0] * b[1] * b[2]
    where = f"{L.name}, {L.example_gpus}"
    if nthr > L.max_threads_per_block:
        raise _refuse(f"kernel '{kernel}': block {b} has {nthr} threads, over the limit of "
                                   f"{L.max_threads_per_block} threads per block ({where}); launch more blocks")
    for axis, n, top in zip("xyz", b, MAX_BLOCK_DIMS, strict=True):
        if n > top:
            raise _refuse(f"kernel '{kernel}': block {b}: {axis} = {n} is over the limit of {top}")
    for axis, n, top in zip("xyz", g, MAX_GRID_DIMS, strict=True):
        if n > top:
            raise _refuse(f"kernel '{kernel}': grid {g}: {axis} = {n} is over the limit of {top}")
    _check_smem(kernel, int(dynamic_smem or 0), 0)
    return g, b


def _check_smem(kernel: str, dynamic: int, static: int) -> None:
    """Refuse more shared memory per block (static + dynamic bytes) than a Numba launch gets on the reference GPU."""
    L = _limits()
    if dynamic < 0:
        raise _refuse(f"kernel '{kernel}': dynamic shared memory must be >= 0 bytes, got {dynamic}")
    if dynamic + static > L.default_smem_per_block:
        parts = f"{static} B static + {dynamic} B dynamic" if static else f"{dynamic} B dynamic"
        raise _refuse(
            f"kernel '{kernel}': {parts} shared memory per block is over the {L.default_smem_per_block} B a launch "
            f"gets on {L.name} ({L.example_gpus}) without opting in, which Numba does not do")


def _patch_config(kmod: Any) -> None:
    """Check ``kernel[grid, block(, stream, shared)]`` as a GPU would, naming the kernel in the error."""
    getitem = kmod.FakeCUDAKernel.__getitem__

    def __getitem__(self: Any, configuration: Any) -> Any:  # noqa: N807
        name = getattr(self.fn, "__name__", "kernel")
        if not isinstance(configuration, tuple) or not 2 <= len(configuration) <= 4:
            raise _refuse(f"kernel '{name}': launch as kernel[grid, block] or kernel[grid, block, "
                                       f"stream, shared_bytes], got kernel[{configuration!r}]")
        dyn = configuration[3] if len(configuration) == 4 else 0
        if not isinstance(dyn, numbers.Integral) or isinstance(dyn, bool):
            raise _refuse(f"kernel '{name}': the dynamic shared memory size must be an int (bytes), "
                                       f"got {dyn!r}")
        check_launch(name, configuration[0], configuration[1], dyn)
        return getitem(self, configuration)

    __getitem__._wb_original = getitem  # type: ignore[attr-defined]
    kmod.FakeCUDAKernel.__getitem__ = __getitem__


# ------------------------------------------------------------------------------------- shared and local arrays
def _patch_memory(kmod: Any, api: Any) -> None:
    """Swap in shared/local allocators that poison, and give every block fresh shared memory."""
    as_dtype, numba_type = api.numpy_support.as_dtype, api.types.Type

    def to_dtype(dtype: Any) -> np.dtype:
        return np.dtype(as_dtype(dtype) if isinstance(dtype, numba_type) else dtype)

    class PoisonedShared(api.FakeCUDAShared):
        """Shared arrays per call site (``code``, instruction offset), poisoned, fresh for every block."""

        _wb_original = api.FakeCUDAShared

        def __init__(self, dynshared_size: int) -> None:
            super().__init__(dynshared_size)
            self._wb_lock = threading.Lock()
            self.new_block()

        def new_block(self, kernel: str = "kernel") -> None:
            """Drop the previous block's arrays: the next block's start poisoned."""
            self._allocations = {}
            self._dynshared = _poisoned_bytes(self._dynshared_size)
            self._wb_kernel, self._wb_static = kernel, 0

        def array(self, shape: Any, dtype: Any, alignment: Any = None) -> Any:
            if alignment is not None:
                raise RuntimeError("Array alignment is not supported in cudasim")
            dtype = to_dtype(dtype)
            caller = sys._getframe(1)
            if shape == 0:  # dynamic shared memory: every such array views the same bytes, as on a GPU
                arr = np.frombuffer(self._dynshared.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
                key: Any = ("dynamic", caller.f_code, caller.f_lasti)
            else:
                key = (caller.f_code, caller.f_lasti)  # the call instruction: two calls on one line stay apart
                with self._wb_lock:
                    arr = self._allocations.get(key)
                    if arr is None:
                        arr = self._allocations[key] = _poisoned(shape, dtype)
                        self._wb_static += arr.nbytes
                        _check_smem(self._wb_kernel, self._dynshared_size, self._wb_static)
            session = _SESSION
            return arr if session is None else session.wrap_alloc(arr, "shared", key, caller)

    class PoisonedLocal(api.FakeCUDALocal):
        """Local arrays start poisoned (a GPU's registers and local memory hold garbage)."""

        _wb_original = api.FakeCUDALocal

        def array(self, shape: Any, dtype: Any, alignment: Any = None) -> Any:
            if alignment is not None:
                raise RuntimeError("Array alignment is not supported in cudasim")
            arr = _poisoned(shape, to_dtype(dtype))
            session = _SESSION
            if session is None:
                return arr
            caller = sys._getframe(1)
            return session.wrap_alloc(arr, "local", (caller.f_code, caller.f_lasti), caller)

    api.FakeCUDAShared = PoisonedShared
    api.FakeCUDALocal = PoisonedLocal


# ------------------------------------------------------------------------------------------- launch patches
_SESSION: _Session | None = None  # the checked launch in progress (the simulator runs one launch at a time)
LAUNCHES = 0  # simulated kernel launches so far in this process (the checker skips its costliest probe for them)


def _patch_launch(kmod: Any) -> None:
    """Wrap a kernel launch (checked under sanitizing), each block (fresh shared memory) and the barrier."""
    call, sync = kmod.FakeCUDAKernel.__call__, kmod.BlockThread.syncthreads

    def __call__(self: Any, *args: Any) -> Any:  # noqa: N807
        global _SESSION
        from workbench import profile_counters as profile
        from workbench._sanitize import active

        global LAUNCHES
        nested = self._device or kmod._get_kernel_context() is not None
        if not nested and self.grid_dim is not None:  # unconfigured: the simulator's own error comes first
            LAUNCHES += 1
            from workbench import _numba_gate

            _numba_gate.check(self, args)  # Numba's CUDA compiler must accept it first (WORKBENCH_FRONTEND=0: skip)
        counting = profile.active()  # wb.profile: count the launch (its memcheck stays on)
        if nested or not (active() or counting):
            return call(self, *args)
        session = _ProfileSession(self) if counting else _Session(self)
        _SESSION = session
        gc_was_on = gc.isenabled()
        gc.disable()  # the access logs are millions of small tuples: collections while they grow cost 2x
        try:
            call(self, *args)
        except _Abort:
            pass
        except Exception as e:
            _SESSION = None
            session.raise_if_memcheck(e)
            raise
        finally:
            _SESSION = None
            if gc_was_on:
                gc.enable()
        session.finish()
        return None

    def block_run(self: Any, grid_point: Any, *args: Any) -> Any:
        ctx = kmod._get_kernel_context()
        if ctx is not None:
            ctx.shared.new_block(getattr(self._f, "__name__", "kernel"))
        session = _SESSION
        if session is None:
            return _run_block(kmod, self, grid_point, args)
        session.begin_block(grid_point, self._block_dim)
        _run_block(kmod, self, grid_point, session.wrap_args(args))
        session.end_block()
        return None

    def syncthreads(self: Any) -> None:
        block = getattr(self, "_wb_block", None)
        if block is None:  # a thread the stock BlockManager.run started
            sync(self)
        else:
            block.wait(self)
        self._wb_epoch += 1
        session = _SESSION
        if session is not None:
            session.barrier(self._wb_epoch - 1)
            if session.counts is not None:
                session.count_barrier(self.thread_id // 32, self._wb_epoch - 1)

    kmod.FakeCUDAKernel.__call__ = __call__
    kmod.BlockManager.run = block_run
    kmod.BlockThread._wb_epoch = 0  # barriers this thread has passed (a class default: set per thread on first)
    kmod.BlockThread.syncthreads = syncthreads


class _BlockBarrier:
    """One block's ``__syncthreads()``: the threads still running meet on a condition variable.

    It replaces the simulator's scheduler, which polled every thread's state in a loop until all were blocked or
    done: that loop held the GIL against the threads it waited for (about 70% of a barrier-heavy launch's time).
    The rule is the simulator's: a barrier opens when every thread that has not returned reached it (threads that
    returned early are not waited for; :mod:`workbench._sanitize`'s synccheck reports that divergence on its own).
    """

    def __init__(self, n: int) -> None:
        self.cond = threading.Condition()
        self.running, self.waiting, self.generation = n, 0, 0
        self.failed: Any = None  # the first thread that raised
        self.abort = False

    def _open(self) -> None:
        self.generation += 1
        self.waiting = 0
        self.cond.notify_all()

    def wait(self, thread: Any) -> None:
        """Block ``thread`` until every running thread of the block reached the barrier."""
        with self.cond:
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            self.waiting += 1
            if self.waiting == self.running:
                self._open()
            else:
                gen = self.generation
                while self.generation == gen and not self.abort:
                    self.cond.wait()
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")

    def done(self, thread: Any) -> None:
        """Count ``thread`` out (returned or raised); the barrier opens if every other one is waiting at it."""
        with self.cond:
            self.running -= 1
            if thread.exception is not None and self.failed is None:
                self.failed = thread
            if self.running and self.waiting == self.running:
                self._open()
            self.cond.notify_all()

    def stop(self) -> None:
        """Release every waiting thread with the simulator's abort error (a thread raised, or the launch ended)."""
        with self.cond:
            self.abort = True
            self.cond.notify_all()


def _run_block(kmod: Any, manager: Any, grid_point: Any, args: Sequence[Any]) -> None:
    """Run one block's threads to the end (``BlockManager.run`` with a barrier that does not poll)."""
    fn = manager._f
    block = _BlockBarrier(int(np.prod(manager._block_dim)))

    def target() -> None:
        fn(*args)

    class Thread(kmod.BlockThread):
        def run(self) -> None:
            try:
                super().run()
            finally:
                block.done(self)

    threads = [Thread(target, manager, grid_point, point, manager._debug)
               for point in np.ndindex(*manager._block_dim)]
    for t in threads:
        t._wb_block = block
        t.start()
    try:
        with block.cond:
            while block.running and block.failed is None:
                block.cond.wait(0.5)  # a timeout: signals (the checker's time limit) reach this thread
    except BaseException:
        block.stop()
        raise
    failed = block.failed or next((t for t in threads if t.exception is not None), None)
    if failed is not None:  # abort the others, do not join them (as the simulator does)
        block.stop()
        raise failed.exception[0].with_traceback(failed.exception[1])


def _patch_atomics(atomic_cls: Any) -> None:
    """Make ``cuda.atomic.*`` on a checked array bounds-check and record an atomic access, then do the op."""

    def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, array: Any, index: Any, *rest: Any) -> Any:
            if type(array) is not _Tracked:
                return orig(self, array, index, *rest)
            if not array._atomic(index, sys._getframe(1)):
                return _scalar_poison(array._a.dtype)
            return orig(self, array._a, index, *rest)

        method.__name__, method.__doc__ = orig.__name__, orig.__doc__
        return method

    for name in ATOMICS:
        setattr(atomic_cls, name, wrap(getattr(atomic_cls, name)))
    cas = atomic_cls.compare_and_swap

    def compare_and_swap(self: Any, array: Any, old: Any, val: Any) -> Any:
        if type(array) is not _Tracked:
            return cas(self, array, old, val)
        if not array._atomic((0,) * array._a.ndim, sys._getframe(1)):
            return _scalar_poison(array._a.dtype)
        return cas(self, array._a, old, val)

    atomic_cls.compare_and_swap = compare_and_swap


class _Abort(Exception):
    """Stop a checked launch early (too many out-of-bounds accesses): the session then raises its report."""


# ------------------------------------------------------------------------------------------- checked arrays
class _Meta:
    """What a checked array is: its space ('shared', 'local', 'global'), name and the session that checks it."""

    __slots__ = ("space", "name", "session", "shadow", "local", "itemsize", "origin")

    def __init__(self, space: str, name: str, session: _Session, itemsize: int = 0, origin: int = 0) -> None:
        self.space, self.name, self.session, self.local = space, name, session, session.local
        self.shadow = space != "local"  # local arrays are private to a thread: bounds checks only
        self.itemsize, self.origin = itemsize, origin  # element bytes; allocation start (profile: sectors)


class _Tracked:
    """A numpy array seen by a checked kernel: every element access is bounds-checked and recorded."""

    __slots__ = ("_a", "_m", "_base", "_shape", "_strides", "_g")

    def __init__(self, a: np.ndarray, meta: _Meta) -> None:
        self._a, self._m = a, meta
        self._base = a.__array_interface__["data"][0]
        self._shape, self._strides = a.shape, a.strides
        n0, s0 = (a.shape[0], a.strides[0]) if a.ndim else (0, 0)
        n1, s1 = (a.shape[1], a.strides[1]) if a.ndim > 1 else (0, 0)
        self._g = (self._base, a.ndim, n0, s0, n1, s1)  # one load on the hot path instead of six

    # -- what a kernel does with an array besides indexing it
    def __getattr__(self, name: str) -> Any:
        return getattr(self._a, name)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        for i in range(len(self._a)):
            yield self[i]

    def __repr__(self) -> str:
        return f"<checked {self._m.space} array {self._m.name} {self._a.dtype}{list(self._shape)}>"

    # -- element access: a fast path for in-bounds Python ints, the rest through _element
    def _fast(self, idx: Any) -> int | None:
        base, nd, n0, s0, n1, s1 = self._g
        tp = type(idx)
        if tp is int:
            return base + idx * s0 if nd == 1 and 0 <= idx < n0 else None
        if tp is not tuple or len(idx) != nd:
            return None
        if nd == 2:  # unrolled: the common case of tiles and matrices
            i, j = idx
            if type(i) is int and type(j) is int and 0 <= i < n0 and 0 <= j < n1:
                return base + i * s0 + j * s1
            return None
        for i, n, s in zip(idx, self._shape, self._strides, strict=True):
            if type(i) is not int or not 0 <= i < n:
                return None
            base += i * s
        return base

    def __getitem__(self, idx: Any) -> Any:
        frame = sys._getframe(1)
        addr = self._fast(idx)
        if addr is None:
            addr, idx = self._element(idx, False, frame)
            if addr is None:
                return self._view(idx, frame)
            if addr < 0:
                return _scalar_poison(self._a.dtype)
        m = self._m
        if m.shadow:  # Session.log, inlined: this is the hot path
            ts = getattr(m.local, "ts", None)
            lg = ts[1] if ts is not None else None
            if lg is None:
                lg = m.session.new_log()
            lg.append((addr, READ, m, idx, frame.f_code, frame.f_lasti))
        return self._a[idx]

    def __setitem__(self, idx: Any, value: Any) -> None:
        frame = sys._getframe(1)
        addr = self._fast(idx)
        if addr is None:
            addr, idx = self._element(idx, True, frame)
            if addr is None:
                self._store_many(idx, value, frame)
                return
            if addr < 0:
                return
        m = self._m
        if m.shadow:  # Session.log, inlined
            ts = getattr(m.local, "ts", None)
            lg = ts[1] if ts is not None else None
            if lg is None:
                lg = m.session.new_log()
            lg.append((addr, WRITE, m, idx, frame.f_code, frame.f_lasti))
        self._a[idx] = value

    def _element(self, idx: Any, write: bool, frame: Any) -> tuple[int | None, Any]:
        """Return (address, int index tuple) of one element, (-1, ..) when out of bounds, (None, idx) for a view."""
        t = idx if type(idx) is tuple else (idx,)
        shape = self._shape
        try:
            ints = tuple(map(operator.index, t))
        except TypeError:  # slices, Ellipsis, None: a sub-array
            return None, idx
        if len(ints) < len(shape):
            return None, idx
        if len(ints) > len(shape):
            return self._oob(ints, write, frame), ints
        addr = self._base
        for i, n, s in zip(ints, shape, self._strides, strict=True):
            if i < 0 or i >= n:
                return self._oob(ints, write, frame), ints
            addr += i * s
        return addr, ints

    def _oob(self, ints: tuple[int, ...], write: bool, frame: Any) -> int:
        self._m.session.out_of_bounds(self._m, ints, self._shape, write, frame)
        return -1

    def _atomic(self, index: Any, frame: Any) -> bool:
        """Check and record an atomic read-modify-write of one element; False when it is out of bounds."""
        t = index if type(index) is tuple else (index,)
        ints = tuple(map(operator.index, t))
        if len(ints) != len(self._shape) or any(i < 0 or i >= n for i, n in zip(ints, self._shape, strict=True)):
            self._oob(ints, True, frame)
            return False
        addr = self._base + sum(i * s for i, s in zip(ints, self._strides, strict=True))
        if self._m.shadow:
            self._m.session.log(self._m, addr, ints, ATOMIC, frame)
        return True

    def _bounds_ok(self, idx: Any, write: bool, frame: Any) -> bool:
        """Check the integer parts of a partial index (before any Ellipsis/None) against the axes they index."""
        t = idx if type(idx) is tuple else (idx,)
        for axis, i in enumerate(t):
            if i is Ellipsis or i is None:
                return True
            if isinstance(i, slice):
                continue
            try:
                i = operator.index(i)
            except TypeError:
                return True  # numpy decides (and raises IndexError on a float, as the simulator does)
            if axis >= len(self._shape) or i < 0 or i >= self._shape[axis]:
                self._oob(t, write, frame)
                return False
        return True

    def _view(self, idx: Any, frame: Any) -> Any:
        """Index to a sub-array: bounds-check the integer parts, then hand back a checked view."""
        if not self._bounds_ok(idx, False, frame):
            return _scalar_poison(self._a.dtype)
        out = self._a[idx]
        return _Tracked(out, self._m) if isinstance(out, np.ndarray) else out

    def _store_many(self, idx: Any, value: Any, frame: Any) -> None:
        """Assign to a sub-array (``a[i, :] = 0``): every element written counts as a write."""
        if not self._bounds_ok(idx, True, frame):
            return
        view = self._a[idx]
        if self._m.shadow and isinstance(view, np.ndarray):
            base = view.__array_interface__["data"][0]
            for pos in np.ndindex(*view.shape):
                addr = base + sum(i * s for i, s in zip(pos, view.strides, strict=True))
                self._m.session.log(self._m, addr, pos, WRITE, frame)
        self._a[idx] = value._a if isinstance(value, _Tracked) else value


def _array_name(frame: Any, fallback: str) -> str:
    """Return the variable a ``cuda.shared.array`` / ``cuda.local.array`` call is assigned to, from its source."""
    code = frame.f_code
    line = linecache.getline(code.co_filename, frame.f_lineno)
    col = None
    try:
        for start, (ln, _, c0, _) in zip(range(0, 1 << 30, 2), code.co_positions(), strict=False):
            if start == frame.f_lasti and ln == frame.f_lineno:
                col = c0
    except (AttributeError, ValueError):  # Python < 3.11: no column positions
        col = None
    head = line[:col] if col is not None else line
    names = re.findall(r"([A-Za-z_]\w*)\s*=(?!=)", head)
    return names[-1] if names else fallback


# ------------------------------------------------------------------------------------------------ the session
READ, WRITE, ATOMIC = 0, 1, 2
# A logged access (per thread, per epoch, in program order): (address, kind, meta, index, code, instruction offset).
_ADDR, _KIND, _META, _IDX, _CODE, _LASTI = range(6)
_RANK = {"shared": 0, "global": 1, "local": 2}  # shared-memory findings first: usually the root cause
# An access placed in the launch: (block number, thread number, ordinal in the thread's epoch log, logged access).
_BLK, _TID, _ORD, _ENT = range(4)


class _Collector:
    """Count findings, keep the ``MAX_RECORDS`` smallest by a sort key, and a count and first record per group."""

    def __init__(self) -> None:
        self.total = 0
        self.items: list[tuple[Any, dict]] = []
        self.groups: dict[Any, list] = {}  # group -> [count, smallest key, its record]

    def add(self, key: Any, group: Any, record: dict) -> None:
        self.total += 1
        self.items.append((key, record))
        if len(self.items) > 20 * MAX_RECORDS:
            self.items.sort(key=_key0)
            del self.items[MAX_RECORDS:]
        g = self.groups.get(group)
        if g is None:
            self.groups[group] = [1, key, record]
        else:
            g[0] += 1
            if key < g[1]:
                g[1], g[2] = key, record

    def records(self) -> list[dict]:
        self.items.sort(key=_key0)
        return [r for _, r in self.items[:MAX_RECORDS]]

    def summary(self) -> list[tuple[int, dict]]:
        """Return (count, first record) per group, in the order of their first records."""
        return [(n, r) for n, _, r in sorted(self.groups.values(), key=lambda g: g[1])]


def _key0(item: tuple) -> Any:
    return item[0]


class _Session:
    """The bookkeeping of one checked launch: per-thread access logs, analysed one barrier interval at a time."""

    def __init__(self, kernel: Any) -> None:
        self.fn = kernel.fn
        self.params = list(inspect.signature(self.fn).parameters)
        self.lock = threading.Lock()  # out-of-bounds records (rare)
        self.alock = threading.Lock()  # the epoch analysis
        self.block = -1
        self.blocks: list[tuple[int, ...]] = []
        self.block_dim: tuple[int, ...] = (1, 1, 1)
        self.pending: dict[int, list] = {}  # epoch -> [(thread number, its log)] of the current block
        self.analyzed = 0  # the next epoch of the current block to analyse
        self.wep: dict[int, int] = {}  # shared address -> epoch of its first write (current block)
        self.local = threading.local()  # .ts: [epoch, its log for that epoch, thread number] of each thread
        self.glob: dict[int, list] = {}  # global address -> [first write, first read, cross-block hazard]
        self.metas: dict[Any, _Meta] = {}
        self.args: list[Any] | None = None
        self.oob, self.races, self.uninit = _Collector(), _Collector(), _Collector()
        self.counts: dict[str, int] | None = None  # profile sessions: the launch's counters

    # -- wiring
    def wrap_args(self, args: Sequence[Any]) -> list[Any]:
        """Return the launch's arguments with every array argument checked (made once per launch)."""
        if self.args is None:
            self.args = [self._wrap_arg(i, a) for i, a in enumerate(args)]
        return self.args

    def _wrap_arg(self, i: int, a: Any) -> Any:
        inner = getattr(a, "_item", a)  # FakeWithinKernelCUDAArray -> FakeCUDAArray
        arr = getattr(inner, "_ary", inner)
        if not isinstance(arr, np.ndarray) or arr.ndim == 0 or arr.dtype.names is not None:
            return a  # scalars and record arrays run unchecked
        name = self.params[i] if i < len(self.params) else f"arg{i}"
        from workbench.profile_counters import allocation_start

        return _Tracked(arr, _Meta("global", name, self, arr.itemsize, allocation_start(arr) or self._data(arr)))

    @staticmethod
    def _data(arr: np.ndarray) -> int:
        return int(arr.__array_interface__["data"][0])

    def wrap_alloc(self, arr: np.ndarray, space: str, key: Any, frame: Any) -> _Tracked:
        meta = self.metas.get(key)
        if meta is None:
            meta = self.metas[key] = _Meta(space, _array_name(frame, f"{space} array"), self, arr.itemsize)
        if space == "shared":
            meta.origin = self._data(arr)  # this block's array (access pictures count its banks from there)
        return _Tracked(arr, meta)

    def begin_block(self, grid_point: Any, block_dim: Any) -> None:
        self.block += 1
        self.blocks.append(tuple(int(g) for g in grid_point))
        self.block_dim = tuple(int(b) for b in block_dim)
        self.pending, self.analyzed, self.wep = {}, 0, {}

    def end_block(self) -> None:
        for ep in sorted(self.pending):
            self._analyze(ep)

    # -- the hot path: append to the running thread's own log (no lock)
    def log(self, meta: _Meta, addr: int, idx: Any, kind: int, frame: Any) -> None:
        """Record one shared/global element access of the running thread, in its log for the current epoch."""
        ts = getattr(self.local, "ts", None)
        lg = ts[1] if ts is not None else None
        if lg is None:
            lg = self.new_log()
        lg.append((addr, kind, meta, idx, frame.f_code, frame.f_lasti))

    def new_log(self) -> list:
        """Start the running thread's log for its current epoch (its first access since the last barrier)."""
        ts = getattr(self.local, "ts", None)
        if ts is None:
            t = threading.current_thread()
            ts = self.local.ts = [t._wb_epoch, None, t.thread_id]  # epoch, its log, thread number
        lg = ts[1] = []
        self.pending.setdefault(ts[0], []).append((ts[2], lg))
        return lg

    def barrier(self, ep: int) -> None:
        """The running thread passed barrier ``ep``: start its next log, and analyse epoch ``ep`` if first through."""
        ts = getattr(self.local, "ts", None)
        if ts is not None:
            ts[0], ts[1] = ep + 1, None
        self.barrier_passed(ep)

    def barrier_passed(self, ep: int) -> None:
        """Analyse epoch ``ep`` (every thread of the block is past it), once, by the first thread through."""
        if self.analyzed > ep:
            return
        with self.alock:
            while self.analyzed <= ep:
                self._analyze(self.analyzed)
                self.analyzed += 1

    # -- the analysis of one barrier interval, in thread order then program order: deterministic
    def _analyze(self, ep: int) -> None:
        logs = self.pending.pop(ep, None)
        if not logs:
            return
        logs.sort(key=_key0)
        summary: dict[int, list] = {}  # address -> [first writer, another writer, first reader, another reader]
        written: list[int] = []
        for tid, log in logs:
            self._scan(ep, tid, log, summary, written)
        for addr in written:
            self.wep.setdefault(addr, ep)
        for s in summary.values():
            self._close(ep, s)

    def _scan(self, ep: int, tid: int, log: list, summary: dict, written: list) -> None:
        blk, wep, mine = self.block, self.wep, set()
        for o, e in enumerate(log):
            addr, kind = e[_ADDR], e[_KIND]
            shared = e[_META].space == "shared"
            if shared:
                if kind != WRITE and addr not in wep and addr not in mine:
                    self._uninit(ep, (blk, tid, o, e))
                if kind != READ:
                    mine.add(addr)
                    written.append(addr)
            if kind == ATOMIC:
                continue  # atomics never race (with each other or, as racecheck defines it, with plain accesses)
            acc = (blk, tid, o, e)
            s = summary.get(addr)
            if s is None:
                s = summary[addr] = [None, None, None, None]
            slot = 0 if kind == WRITE else 2
            if s[slot] is None:
                s[slot] = acc
            elif s[slot + 1] is None and s[slot][_TID] != tid:
                s[slot + 1] = acc
            if not shared:
                self._cross_block(addr, acc, kind == WRITE)

    def _cross_block(self, addr: int, acc: tuple, write: bool) -> None:
        g = self.glob.get(addr)
        if g is None:
            g = self.glob[addr] = [None, None, None]
        blk = acc[_BLK]
        gw, gr = g[0], g[1]
        if g[2] is None:
            if gw is not None and gw[_BLK] != blk:
                g[2] = ("WAW" if write else "RAW", gw, acc)
            elif write and gr is not None and gr[_BLK] != blk:
                g[2] = ("WAR", gr, acc)
        if write:
            if gw is None:
                g[0] = acc
        elif gr is None:
            g[1] = acc

    def _close(self, ep: int, s: list) -> None:
        """Decide whether an element raced in one barrier interval of one block, and record the hazard."""
        w1, w2, r1, r2 = s
        if w1 is None:
            return
        if w2 is not None:
            hazard, pair = "WAW", sorted((w1, w2), key=lambda a: (a[_ORD], a[_TID]))
            readers = {r[_TID] for r in (r1, r2) if r is not None}
            if w1[_TID] in readers and w2[_TID] in readers:  # both read it first: x = a[i]; a[i] = x + 1
                hazard = "WAW (read-modify-write)"
        else:
            r = r1 if r1 is not None and r1[_TID] != w1[_TID] else r2
            if r is None:
                return
            hazard = "RAW" if w1[_ORD] <= r[_ORD] else "WAR"
            pair = [w1, r] if hazard == "RAW" else [r, w1]
        self._race(hazard, pair[0], pair[1], "block", ep)

    # -- findings
    def _race(self, hazard: str, first: tuple, second: tuple, scope: str, ep: int) -> None:
        e = first[_ENT]
        meta = e[_META]
        rmw = hazard.endswith("(read-modify-write)")
        rec = {"tool": "racecheck", "kernel": self.fn.__name__, "hazard": hazard.split()[0], "space": meta.space,
               "array": meta.name, "index": _as_tuple(e[_IDX]), "scope": scope, "read_modify_write": rmw,
               "first": self._who(first), "second": self._who(second)}
        a, b = rec["first"], rec["second"]
        group = (hazard, meta.space, meta.name, scope, a["file"], a["line"], b["file"], b["line"])  # hazard: + rmw
        self.races.add((_RANK[meta.space], meta.name, rec["index"], first[_BLK], ep), group, rec)

    def _uninit(self, ep: int, acc: tuple) -> None:
        e = acc[_ENT]
        meta = e[_META]
        rec = {"tool": "initcheck", "kernel": self.fn.__name__, "space": meta.space, "array": meta.name,
               "index": _as_tuple(e[_IDX]), "kind": "read"}
        who = self._who(acc)
        rec.update(block=who["block"], thread=who["thread"], file=who["file"], line=who["line"])
        key = (meta.space, meta.name, rec["index"], acc[_BLK], ep, acc[_TID], acc[_ORD])
        self.uninit.add(key, (meta.space, meta.name, rec["file"], rec["line"]), rec)

    def out_of_bounds(self, meta: _Meta, idx: tuple, shape: tuple, write: bool, frame: Any) -> None:
        """Record an index outside ``shape`` (the access is dropped); stop the launch after ``_MAX_OOB`` of them."""
        t = threading.current_thread()
        rec = {"tool": "memcheck", "kernel": self.fn.__name__, "space": meta.space, "array": meta.name,
               "index": idx, "shape": tuple(shape), "kind": "write" if write else "read",
               "block": self.blocks[self.block] if self.blocks else (0, 0, 0), "thread": tuple(t.threadIdx),
               "file": frame.f_code.co_filename, "line": frame.f_lineno}
        neg = any(i < 0 for i in idx)
        group = (meta.space, meta.name, rec["kind"], frame.f_code, frame.f_lineno, neg)
        with self.lock:
            key = (self.block, t.thread_id, frame.f_lineno, frame.f_lasti, _RANK[meta.space], meta.name, idx)
            self.oob.add(key, group, rec)
            too_many = self.oob.total >= _MAX_OOB
        if too_many:
            raise _Abort(f"stopped after {_MAX_OOB} out-of-bounds accesses")

    def _thread(self, tid: int) -> tuple[int, int, int]:
        bx, by = self.block_dim[0], self.block_dim[1] if len(self.block_dim) > 1 else 1
        return tid % bx, (tid // bx) % by, tid // (bx * by)

    def _who(self, acc: tuple) -> dict:
        e = acc[_ENT]
        return {"block": self.blocks[acc[_BLK]], "thread": self._thread(acc[_TID]), "file": e[_CODE].co_filename,
                "line": _lineno(e[_CODE], e[_LASTI]), "access": ("read", "write", "atomic")[e[_KIND]],
                "warp": acc[_TID] // 32}

    # -- the verdict
    def finish(self) -> None:
        """Record the cross-block hazards, then raise the launch's error (memcheck > racecheck > initcheck)."""
        for g in self.glob.values():
            if g[2] is not None:
                hazard, first, second = g[2]
                self._race(hazard, first, second, "grid", sys.maxsize)
        stopped = f"\n  (the launch was stopped after {_MAX_OOB} out-of-bounds accesses)" \
            if self.oob.total >= _MAX_OOB else ""
        for tool in ("memcheck", "racecheck", "initcheck"):
            if self._tools[tool][0].total:
                raise self._error(tool, stopped if tool == "memcheck" else "")

    def _error(self, tool: str, note: str = "") -> Exception:
        """Return the error of ``tool``, carrying its records and, as ``reports``, every tool's (the CPU engine's
        convention: ``{tool: (records, total)}``)."""
        from workbench.cuda.errors import MemcheckError, RaceError, UninitializedError

        cls = {"memcheck": MemcheckError, "racecheck": RaceError, "initcheck": UninitializedError}[tool]
        coll, fmt = self._tools[tool]
        err = cls(self._message(tool, coll, fmt) + note, coll.records(), coll.total)
        err.reports = {t: (c.records(), c.total) for t, (c, _) in self._tools.items()}  # type: ignore[attr-defined]
        return err

    @property
    def _tools(self) -> dict[str, tuple[_Collector, Callable[[dict], str]]]:
        return {"memcheck": (self.oob, _fmt_oob), "racecheck": (self.races, _fmt_race),
                "initcheck": (self.uninit, _fmt_uninit)}

    def raise_if_memcheck(self, exc: BaseException) -> None:
        """A kernel that failed after an out-of-bounds access: report the access (the likely cause) instead."""
        if self.oob.total:
            raise self._error("memcheck", f"\n  then the kernel raised {type(exc).__name__}: {exc}") from exc

    def _message(self, tool: str, coll: _Collector, fmt: Callable[[dict], str]) -> str:
        code = self.fn.__code__
        what = {"memcheck": ("out-of-bounds access", "out-of-bounds accesses"),
                "racecheck": ("race hazard", "race hazards"),
                "initcheck": ("read of uninitialized shared memory", "reads of uninitialized shared memory")}[tool]
        lines = [f"checked launch of kernel '{self.fn.__name__}' ({_short(code.co_filename)}:{code.co_firstlineno}, "
                 f"Numba simulator): {coll.total} {what[coll.total != 1]} ({tool})"]
        groups = coll.summary()
        for n, r in groups[:8]:
            lines.append(f"  {fmt(r)}" + (f" [and {n - 1} more like it]" if n > 1 else ""))
        if len(groups) > 8:
            lines.append(f"  ... and {len(groups) - 8} more places")
        later = {"memcheck": ((self.races, "race hazards"), (self.uninit, "uninitialized shared reads")),
                 "racecheck": ((self.uninit, "uninitialized shared reads"),)}.get(tool, ())
        others = [f"{c.total} {w}" for c, w in later if c.total]
        if others:
            lines.append("  also found: " + ", ".join(others))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------- profile counting
_G_LD, _G_ST, _S_LD, _S_ST = (
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
     "smsp__sass_data_bytes_mem_global_op_ld.sum", "smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum",
     "wb__global_ideal_sectors_op_ld.sum"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
     "smsp__sass_data_bytes_mem_global_op_st.sum", "smsp__sass_thread_inst_executed_op_global_st_pred_on.sum",
     "wb__global_ideal_sectors_op_st.sum"),
    ("smsp__inst_executed_op_shared_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smsp__sass_data_bytes_mem_shared_op_ld.sum",
     "smsp__sass_thread_inst_executed_op_shared_ld_pred_on.sum"),
    ("smsp__inst_executed_op_shared_st.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "smsp__sass_data_bytes_mem_shared_op_st.sum",
     "smsp__sass_thread_inst_executed_op_shared_st_pred_on.sum"),
)
_ATOMIC_KEYS = {"global": ("wb__global_atomic_requests.sum", "wb__global_atomics.sum"),
                "shared": ("smsp__inst_executed_op_shared_atom.sum", "wb__shared_atomics.sum")}


def shared_wavefronts(accesses: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """Return (wavefronts, active phases) of one warp-level shared-memory request of (lane, address, bytes).

    32 banks of 4 bytes; a wavefront serves one word per bank, to any number of lanes. Lanes go in phases: the whole
    warp for accesses of up to 4 bytes, half-warps for 8-byte and quarter-warps for 16-byte ones. A phase needs as
    many wavefronts as the most distinct words one bank holds.
    """
    width = max(n for _, _, n in accesses)
    per_phase = 32 if width <= 4 else 16 if width <= 8 else 8
    phases: dict[int, set[int]] = {}
    for lane, addr, n in accesses:
        words = phases.setdefault(lane // per_phase, set())
        words.update(range(addr >> 2, ((addr + max(n, 1) - 1) >> 2) + 1))
    wave = 0
    for words in phases.values():
        per_bank: dict[int, int] = {}
        for w in words:
            per_bank[w & 31] = per_bank.get(w & 31, 0) + 1
        wave += max(per_bank.values())
    return wave, len(phases)


_STARTS: dict[Any, dict[int, int]] = {}


def _instruction_start(code: Any, lasti: int) -> int:
    """Return the offset of the instruction ``lasti`` belongs to: a specialised instruction (Python 3.11+) reports
    an offset inside its inline cache once it has warmed up, so one access site shows two offsets."""
    starts = _STARTS.get(code)
    if starts is None:
        import dis

        starts, cur = {}, 0
        for ins in dis.get_instructions(code, show_caches=True):
            if ins.opname != "CACHE":
                cur = ins.offset
            starts[ins.offset] = cur
        _STARTS[code] = starts
    return starts.get(lasti, lasti)


class _ProfileSession(_Session):
    """A launch inside ``wb.profile``: the checked launch's logs, counted as warp-level requests, not race-checked."""

    def __init__(self, kernel: Any) -> None:
        super().__init__(kernel)
        self.kernel = kernel
        self.counts = {k: 0 for keys in (_G_LD, _G_ST, _S_LD, _S_ST) for k in keys}
        for keys in _ATOMIC_KEYS.values():
            self.counts.update(dict.fromkeys(keys, 0))
        self.counts["wb__barriers.sum"] = 0
        self.block_barriers: set[tuple[int, int]] = set()
        from workbench import profile_counters as profile

        self.trace = profile.trace_wanted()  # an access picture's block to trace (None: no trace, the usual case)
        self.traced: list[tuple] = []

    def count_barrier(self, warp: int, ep: int) -> None:
        with self.lock:
            self.block_barriers.add((warp, ep))

    def end_block(self) -> None:
        super().end_block()
        self.counts["wb__barriers.sum"] += len(self.block_barriers)  # one per warp per barrier it passed
        self.block_barriers = set()

    def _analyze(self, ep: int) -> None:
        logs = self.pending.pop(ep, None)
        if not logs:
            return
        warps: dict[int, list[tuple[int, list]]] = {}
        for tid, log in logs:
            warps.setdefault(tid // 32, []).append((tid % 32, log))
        for wi, lanes in warps.items():
            requests: dict[tuple, list] = {}  # (code, offset, n-th execution by the lane) -> [(lane, access)]
            for lane, log in lanes:
                nth: dict[tuple, int] = {}
                for e in log:
                    site = (e[_CODE], _instruction_start(e[_CODE], e[_LASTI]))
                    k = nth.get(site, 0)
                    nth[site] = k + 1
                    requests.setdefault((site, k), []).append((lane, e))
            for members in requests.values():
                self._count(members)
            if self.trace is not None:
                self._trace(wi, requests)

    def _count(self, members: list[tuple[int, tuple]]) -> None:
        by_space: dict[str, list[tuple[int, tuple]]] = {}
        for lane, e in members:
            by_space.setdefault(e[_META].space, []).append((lane, e))
        c = self.counts
        for space, acc in by_space.items():
            kind = acc[0][1][_KIND]
            if kind == ATOMIC:
                req, lanes = _ATOMIC_KEYS[space]
                c[req] += 1
                c[lanes] += len(acc)
            elif space == "global":
                self._count_global(acc, _G_ST if kind == WRITE else _G_LD)
            else:
                wave, phases = shared_wavefronts([(lane, e[_ADDR], e[_META].itemsize) for lane, e in acc])
                keys = _S_ST if kind == WRITE else _S_LD
                c[keys[0]] += 1
                c[keys[1]] += wave
                c[keys[2]] += wave - phases
                c[keys[3]] += sum(e[_META].itemsize for _, e in acc)
                c[keys[4]] += len(acc)

    def _count_global(self, acc: list[tuple[int, tuple]], keys: tuple[str, ...]) -> None:
        sectors: set[int] = set()
        nbytes = 0
        for _, e in acc:
            m = e[_META]
            off = e[_ADDR] - m.origin
            sectors.update(range(off >> 5, ((off + m.itemsize - 1) >> 5) + 1))
            nbytes += m.itemsize
        c = self.counts
        c[keys[0]] += 1
        c[keys[1]] += len(sectors)
        c[keys[2]] += nbytes
        c[keys[3]] += len(acc)
        c[keys[4]] += min(len(sectors), -(-nbytes // 32))

    def _trace(self, wi: int, requests: dict[tuple, list]) -> None:
        """Keep the requests of the block and warp an access picture asked for: (warp, [(lane, access)])."""
        want, g = self.trace, tuple(self.kernel.grid_dim or (1,)) + (1, 1)
        x, y, z = (tuple(self.blocks[-1]) + (0, 0))[:3]
        if x + g[0] * (y + g[1] * z) == want.block and want.warp in (-1, wi):
            self.traced += [(wi, members) for members in requests.values()]

    def _report_trace(self, grid: tuple, block: tuple) -> None:
        """Hand the traced requests to the access picture, in the CPU engine's trace format."""
        import linecache

        from workbench import access_picture
        from workbench import profile_counters as profile

        regions: dict[Any, int] = {}
        buffers: dict[int, tuple] = {}
        shared: dict[Any, tuple[str, int, int]] = {}
        rows, lines = [], {}
        for seq, (wi, members) in enumerate(self.traced):
            for lane, e in members:
                m, code = e[_META], e[_CODE]
                pc = hash((code, _instruction_start(code, e[_LASTI]))) & 0xFFFFFFFF
                if pc not in lines:
                    line = next((ln for a, b, ln in code.co_lines() if a <= e[_LASTI] < b), None)
                    lines[pc] = (line, linecache.getline(code.co_filename, line).strip() if line else "")
                flags = (4 if e[_KIND] == ATOMIC else 2 if e[_KIND] == WRITE else 1) << 28
                if m.space == "global":
                    rid = regions.setdefault(m, len(regions))
                    arg = self.params.index(m.name) if m.name in self.params else None
                    buffers[rid] = (m.name, arg, m.itemsize, 0, 0)
                    rows.append((e[_ADDR] - m.origin, seq, flags | m.itemsize, pc, rid, wi, lane))
                elif m.space == "shared":
                    lo = shared.setdefault(m, (m.name, len(shared) << 16, 0))[1]  # 64 KiB apart, each from bank 0
                    rows.append((lo + e[_ADDR] - m.origin, seq, flags | m.itemsize, pc, -1, wi, lane))
        variables = [(n, lo, 1 << 16) for n, lo, _ in shared.values()]
        profile.record_trace(access_picture.trace_from_rows(
            rows, kernel=self.fn.__name__, backend="numba", grid=grid, block=block, traced_block=self.trace.block,
            warp=self.trace.warp, buffers=buffers, shared=variables, lines=lines))

    def finish(self) -> None:
        """Raise a memcheck error if an index went out of bounds; otherwise hand the counts to wb.profile."""
        from workbench import profile_counters as profile

        if self.oob.total:
            raise self._error("memcheck")
        c = dict(self.counts)
        c["wb__global_load_bytes.sum"] = 32 * c["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
        c["wb__global_store_bytes.sum"] = 32 * c["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]
        grid, block = tuple(self.kernel.grid_dim or ()), tuple(self.kernel.block_dim or ())
        c["wb__threads.sum"] = int(np.prod(grid or (1,))) * int(np.prod(block or (1,)))
        if self.trace is not None:
            self._report_trace(grid, block)
        profile.record_launch(self.fn.__name__, "numba", grid=grid, block=block, metrics=c)


def _as_tuple(idx: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in idx) if type(idx) is tuple else (int(idx),)


_LINES: dict[Any, list[tuple[int, int, int]]] = {}


def _lineno(code: Any, lasti: int) -> int:
    """Return the source line of the instruction at byte offset ``lasti`` of ``code``."""
    ranges = _LINES.get(code)
    if ranges is None:
        ranges = _LINES[code] = [r for r in code.co_lines() if r[2] is not None]
    for start, end, line in ranges:
        if start <= lasti < end:
            return line
    return code.co_firstlineno


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _idx(r: dict) -> str:
    return f"{r['array']}[{', '.join(map(str, r['index']))}]"


def _at(r: dict) -> str:
    return f"{os.path.basename(r['file'])}:{r['line']}"


def _fmt_oob(r: dict) -> str:
    neg = any(i < 0 for i in r["index"])
    why = ("a negative index (Numba wraps it to the array's end, on a GPU too: almost always a missing guard)"
           if neg else f"outside its shape {tuple(r['shape'])}")
    return (f"invalid {r['space']} {r['kind']} at {_at(r)}: {_idx(r)} is {why} "
            f"(thread {r['thread']} of block {r['block']})")


_HINTS = {"RMW": "both read it first: a read-modify-write two threads do at once loses updates; use cuda.atomic.*",
          "WAW": "two threads store to one element: a missing atomic, or a barrier between the stores?",
          "RAW": "a read sees another thread's store or not, by luck: a missing cuda.syncthreads()?",
          "WAR": "a store may land before another thread's read: a missing cuda.syncthreads()?"}


def _fmt_race(r: dict) -> str:
    a, b = r["first"], r["second"]
    verb = {"read": "reads", "write": "writes"}
    if r["scope"] == "block":
        who_a, who_b = f"thread {a['thread']}", f"thread {b['thread']}"
        hint = _HINTS["RMW" if r.get("read_modify_write") else r["hazard"]]
        when = f"in block {a['block']} with no barrier between them ({hint})"
    else:
        who_a, who_b = (f"thread {a['thread']} of block {a['block']}", f"thread {b['thread']} of block {b['block']}")
        when = "in different blocks, which nothing orders (use cuda.atomic.*, or split the work into two launches)"
    return (f"{r['hazard']} hazard on {r['space']} {_idx(r)}: {who_a} {verb[a['access']]} it at {_at(a)}, "
            f"{who_b} {verb[b['access']]} it at {_at(b)}, {when}")


def _fmt_uninit(r: dict) -> str:
    return (f"{r['space']} {_idx(r)} read at {_at(r)} by thread {r['thread']} of block {r['block']} before any "
            "thread wrote it (shared memory starts as garbage: fill it before a barrier, zeros for the "
            "out-of-range part of a tile)")
