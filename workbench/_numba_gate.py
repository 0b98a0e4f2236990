"""Front-end gate: a Numba kernel must compile for a GPU (sm_90) before the simulator runs it.

The simulator runs a kernel as plain Python, so it accepts what Numba's CUDA compiler refuses: a call to an
arbitrary Python function (``print`` of an object, ``np.linalg``, ``time.time()``, a host helper that is not
``@cuda.jit(device=True)``), a Python object in the kernel, a list comprehension, a write to a read-only array.
Before the first launch of a kernel with a given argument signature, :func:`check` compiles it with
``numba.cuda.compile_ptx(pyfunc, signature, cc=(9, 0))`` (the signature taken from the launch's arguments, as
Numba's dispatcher types them) and raises :class:`~workbench.cuda.errors.CompileError` carrying Numba's own message
when the compiler refuses it.

Where it compiles: not in this process. In cpu mode ``numba.cuda`` is the simulator: numba-cuda replaces
``numba.cuda.compiler``, ``.dispatcher`` and ``.cudadrv`` in ``sys.modules`` with its simulator's and leaves
``compile_ptx`` as None, so the real compiler cannot be reached here. One helper process (this file run as a
script, ``NUMBA_ENABLE_CUDASIM=0``) is started on the first check, about 3 s, and serves every later compile
(tens of ms each after the first). The kernel travels as its code object plus the values of the globals and
closure cells it names (modules by name; ``@cuda.jit`` functions and plain functions the same way, recursively;
numbers, arrays and Numba types by pickle; anything else as a stand-in of the same class name, which Numba refuses
as it would refuse the object).

Verdicts are cached on disk under ``workbench.cuda.toolchain.cache_dir("numba-frontend")``, keyed by the kernel's
code (bytecode, constants, names, file and line table), the globals and closure cells it uses, the signature and
the versions of numba, numba-cuda and Python; and in memory per kernel object and signature, so a kernel is
compiled once, as Numba's dispatcher compiles it once per signature on a GPU.

Opt-out: ``WORKBENCH_FRONTEND=0`` in the environment (shared with the CUDA C and Triton gates) skips the gate;
:func:`frontend` is the same as a context manager, for tests that need simulator-only behaviour. When the gate
itself cannot run (the helper fails to start, an argument type it cannot describe) the launch goes ahead and a
warning says why, once.

This module imports only the standard library at the top: it is also the helper's script.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import pickle
import struct
import sys
import threading
import types
import weakref
from collections.abc import Iterator
from typing import Any

ENV = "WORKBENCH_FRONTEND"
CC = (9, 0)  # the reference GPU (H100/H200)
_PROTOCOL = 1  # bump when the request or verdict format changes (part of the cache key)
TIMEOUT_S = 300.0  # one compile; the helper is restarted after a timeout


def enabled() -> bool:
    """Return whether the front-end gate is on (``WORKBENCH_FRONTEND`` is not ``0``)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@contextlib.contextmanager
def frontend(on: bool) -> Iterator[None]:
    """Turn the front-end gate on or off inside the ``with`` block (sets ``WORKBENCH_FRONTEND``)."""
    old = os.environ.get(ENV)
    os.environ[ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


class _CannotDescribe(Exception):
    """A launch argument or a value the kernel uses that the gate cannot send to the compiler."""


# ------------------------------------------------------------------------------------------ the kernel, described
def _code_names(code: types.CodeType) -> set[str]:
    """Return the global names ``code`` and the code objects nested in it load (not attribute names)."""
    import dis

    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _is_jit(v: Any) -> bool:
    t = type(v)
    return t.__name__ == "FakeCUDAKernel" and t.__module__.startswith("numba.cuda.simulator")


def _all_names(code: types.CodeType) -> set[str]:
    """Return every name ``code`` and its nested code objects use, attribute names included."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _all_names(c)
    return names


def _importable_in_helper(m: types.ModuleType) -> bool:
    """Return whether the helper may import ``m`` by name: the standard library and installed packages, not the
    workbench, the project's kernels or the user's own modules (they import the workbench, or are not on its path)."""
    from workbench.registry import KERNELS_PACKAGE

    top = m.__name__.split(".")[0]
    if top in ("workbench", KERNELS_PACKAGE, "tests", "__main__"):
        return False
    if top in sys.builtin_module_names:
        return True
    f = getattr(m, "__file__", None) or ""
    return any(f.startswith(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)


def _describe_attr(v: Any, stack: tuple, attrs: frozenset) -> tuple:
    """Describe a module attribute: a host function stays a stand-in (Numba refuses it), not its whole graph."""
    if isinstance(v, types.FunctionType):
        return ("opaque", "builtins", "function")
    return describe_value(v, stack, attrs)


def describe_value(v: Any, stack: tuple = (), attrs: frozenset = frozenset()) -> tuple:
    """Return a picklable description of a value a kernel uses, which :func:`_build_value` rebuilds.

    ``attrs``: the names the kernel's code uses, which are the attributes it may read from a module that the
    helper cannot import (that module is sent as a namespace of those attributes).
    """
    if isinstance(v, types.ModuleType):
        if _importable_in_helper(v) or v in stack:
            return ("module", v.__name__)
        inner = (*stack, v)
        return ("namespace", v.__name__, {a: _describe_attr(getattr(v, a), inner, attrs)
                                          for a in sorted(attrs) if a in vars(v)})
    if _is_jit(v):
        return ("jit", describe_function(v.fn, stack), bool(v._device), bool(getattr(v, "_fastmath", False)))
    if isinstance(v, types.FunctionType):
        return ("func", describe_function(v, stack))
    if isinstance(v, enum.EnumMeta):
        return ("enumcls", v.__qualname__, issubclass(v, int), [(m.name, m.value) for m in v])
    if isinstance(v, type):
        where = (v.__module__, v.__qualname__)
        return ("ref", *where) if v.__module__ in ("builtins", "numpy") else ("opaque", *where)
    t = type(v)
    if isinstance(v, enum.Enum):  # a user's enum class may not import in the helper: rebuild it from its members
        members = [(m.name, m.value) for m in t]
        return ("enum", t.__qualname__, issubclass(t, int), members, v.name)
    if t.__module__.split(".")[0] not in _PICKLED:
        return ("opaque", t.__module__, t.__qualname__)  # Numba types no such global: only its class matters
    if t.__name__ == "ndarray" and getattr(v, "nbytes", 0) > 1 << 16 and v.dtype.names is None:
        # A big constant table: Numba bakes a global array into the code, which takes minutes for megabytes. The
        # compiler's verdict depends on its type (dtype, ndim, layout), so a one-element stand-in of that type goes;
        # the key keeps a hash of the real contents.
        digest = hashlib.sha256(memoryview(v.tobytes())).hexdigest()
        layout = "C" if v.flags.c_contiguous else "F" if v.flags.f_contiguous else "A"
        return ("small", v.dtype.str, v.ndim, layout, digest)
    try:
        data = pickle.dumps(v, protocol=4)
    except Exception:  # noqa: BLE001  (anything unpicklable is shipped as a stand-in of its class)
        data = None
    if data is None or len(data) > 1 << 24:
        return ("opaque", t.__module__, t.__qualname__)
    return ("pickle", data, t.__module__, t.__qualname__)


# Modules whose values a kernel can use as globals (numbers, strings, tuples, numpy arrays and scalars, Numba
# types): sent by pickle. A value of any other class (a torch tensor, a user's object) is sent as a stand-in.
_PICKLED = frozenset({"builtins", "numpy", "numba", "numba_cuda", "collections"})


def describe_function(fn: types.FunctionType, stack: tuple = ()) -> dict:
    """Return a picklable description of a Python function: its code and the values of what it names."""
    if fn in stack:  # recursion: Numba on a GPU does not compile it either; the stand-in says where
        return {"recursive": fn.__qualname__}
    stack = (*stack, fn)
    g = fn.__globals__
    attrs = frozenset(_all_names(fn.__code__))
    used = {n: describe_value(g[n], stack, attrs) for n in sorted(_code_names(fn.__code__)) if n in g}
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(describe_value(cell.cell_contents, stack, attrs))
        except ValueError:  # an empty cell (assigned later)
            cells.append(("empty",))
    import marshal

    return {"code": marshal.dumps(fn.__code__), "key": code_key(fn.__code__), "name": fn.__name__,
            "qualname": fn.__qualname__, "module": fn.__module__ or "__main__", "globals": used, "cells": cells,
            "defaults": [describe_value(d, stack) for d in fn.__defaults__ or ()]}


def code_key(code: types.CodeType) -> str:
    """Return a stable hash of a code object: bytecode, constants, names, file and line table (not addresses)."""
    h = hashlib.sha256()
    for part in (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                 code.co_filename, code.co_name, code.co_firstlineno, getattr(code, "co_linetable", b""),
                 code.co_argcount, code.co_kwonlyargcount, code.co_flags):
        h.update(repr(part).encode())
    for c in code.co_consts:
        h.update((code_key(c) if isinstance(c, types.CodeType) else repr(c)).encode())
    return h.hexdigest()


def _key_view(d: Any) -> Any:
    """Return ``d`` with marshalled code replaced by its stable key (marshal output depends on refcounts)."""
    if isinstance(d, dict):
        return {k: _key_view(v) for k, v in d.items() if k != "code"}
    if isinstance(d, (list, tuple)):
        return [_key_view(v) for v in d]
    if isinstance(d, bytes):
        return hashlib.sha256(d).hexdigest()
    return d


def describe_args(args: tuple) -> list[tuple]:
    """Return the launch's argument types as Numba's CUDA dispatcher would type them (picklable descriptions)."""
    return [_describe_arg(a) for a in args]


def _describe_arg(a: Any) -> tuple:
    import numpy as np

    arr = getattr(getattr(a, "_item", a), "_ary", None)  # a simulator device array (FakeCUDAArray)
    readonly = False
    if arr is None and isinstance(a, np.ndarray):
        arr, readonly = a, not a.flags.writeable  # a host array: Numba types a read-only one as readonly
    if isinstance(arr, np.ndarray):
        if arr.dtype.names is not None or arr.dtype.hasobject:
            raise _CannotDescribe(f"an array of dtype {arr.dtype}")
        layout = "C" if arr.flags.c_contiguous else "F" if arr.flags.f_contiguous else "A"
        return ("array", arr.dtype.str, arr.ndim, layout, readonly)
    if isinstance(a, bool):
        return ("scalar", "?")
    if isinstance(a, int):
        return ("scalar", "<i8")
    if isinstance(a, float):
        return ("scalar", "<f8")
    if isinstance(a, complex):
        return ("scalar", "<c16")
    if isinstance(a, np.generic) and a.dtype.names is None and not a.dtype.hasobject:
        return ("scalar", a.dtype.str)
    if isinstance(a, tuple):
        return ("tuple", [_describe_arg(x) for x in a])
    raise _CannotDescribe(f"an argument of type {type(a).__module__}.{type(a).__qualname__}")


# ------------------------------------------------------------------------------------------------ the host side
# kernel function -> {(code, signature): verdict}, for this process (weak: a kernel made in a loop is dropped)
_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_WARNED: set[str] = set()
_LOCK = threading.Lock()


def _versions() -> dict:
    from importlib.metadata import version

    out = {"python": sys.version.split()[0], "protocol": str(_PROTOCOL)}
    for dist in ("numba", "numba-cuda"):
        try:
            out[dist] = version(dist)
        except Exception:  # noqa: BLE001
            out[dist] = "unknown"
    return out


def check(kernel: Any, args: tuple) -> None:
    """Compile a simulated kernel for sm_90 once per signature; raise CompileError when Numba refuses it.

    ``kernel`` is the simulator's ``FakeCUDAKernel``, ``args`` the launch's arguments. Does nothing when the gate
    is off (``WORKBENCH_FRONTEND=0``).
    """
    if not enabled():
        return
    fn = kernel.fn
    if not isinstance(fn, types.FunctionType):
        _warn_once(f"fn:{id(fn)}", f"the front-end gate skipped {fn!r}: not a Python function")
        return
    try:
        sig = describe_args(args)
    except _CannotDescribe as e:
        _warn_once(f"sig:{fn.__qualname__}", f"kernel '{fn.__name__}': the front-end gate skipped it ({e} cannot "
                   "be typed for Numba's CUDA compiler here); the simulator runs it unchecked")
        return
    mine = _VERDICTS.get(fn)
    if mine is None:
        mine = _VERDICTS[fn] = {}
    mem = (fn.__code__, repr(sig))  # a function's code can be replaced; its closure and globals are frozen
    verdict = mine.get(mem)
    if verdict is None:
        verdict = _verdict(fn, sig)
        if verdict is None:
            return
        mine[mem] = verdict
    if not verdict["ok"]:
        raise _refusal(fn, verdict)


def _verdict(fn: Any, sig: list) -> dict | None:
    """Return the cached or freshly compiled verdict for ``fn`` at ``sig``; None when the gate cannot run."""
    try:
        desc = describe_function(fn)
    except Exception as e:  # noqa: BLE001  (a value that cannot even be described: run unchecked, say so)
        _warn_once(f"desc:{fn.__qualname__}", f"kernel '{fn.__name__}': the front-end gate skipped it ({e})", 1)
        return None
    key = hashlib.sha256(json.dumps([_key_view(desc), sig, _versions()], sort_keys=True, default=repr)
                         .encode()).hexdigest()
    path = _cache_path(key)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    try:
        with _LOCK:
            verdict = _helper().compile(desc, sig)
    except _GateUnavailable as e:
        _warn_once("helper", f"the Numba front-end gate is unavailable, kernels run on the simulator unchecked: {e}", 1)
        return None
    if verdict.get("internal"):  # the compiler's environment failed, not the kernel: run, say so, cache nothing
        _warn_once("internal", f"kernel '{fn.__name__}': Numba's CUDA compiler could not run here "
                   f"({verdict['type']}: {verdict['message'].splitlines()[0] if verdict['message'] else ''}); "
                   "the simulator runs it unchecked", 1)
        return None
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(verdict))
        os.replace(tmp, path)
    except OSError:
        pass
    return verdict


def _cache_path(key: str) -> Any:
    from workbench.cuda.toolchain import cache_dir

    d = cache_dir("numba-frontend") / key[:2]
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{key}.json"


def _refusal(fn: Any, verdict: dict) -> Exception:
    from workbench._numba_sim import _short  # the simulator's own path shortener (the parent process has it loaded)
    from workbench.cuda.errors import CompileError

    code = fn.__code__
    where = f"{_short(code.co_filename)}:{code.co_firstlineno}"
    msg = (f"kernel '{fn.__name__}' ({where}) does not compile for a GPU. Numba's CUDA compiler "
           f"(numba-cuda {_versions()['numba-cuda']}, compile_ptx for sm_{CC[0]}{CC[1]}) says:\n"
           f"{verdict['type']}: {verdict['message'].rstrip()}\n"
           f"(the simulator would have run it as plain Python, which a GPU cannot; {ENV}=0 skips this check)")
    return CompileError(msg, log=verdict["message"], path=code.co_filename)


def _warn_once(what: str, msg: str, depth: int = 0) -> None:
    """Warn once per ``what``, pointing at the user's launch (``depth``: frames between check() and here)."""
    if what in _WARNED:
        return
    _WARNED.add(what)
    import warnings

    warnings.warn(msg, RuntimeWarning, stacklevel=4 + depth)


class _GateUnavailable(Exception):
    """The helper process could not be started or died."""


class _Helper:
    """The long-lived process that runs Numba's real CUDA compiler (one per simulator process)."""

    def __init__(self) -> None:
        import subprocess
        import tempfile

        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", NUMBA_DISABLE_CUDA="0")
        self.log = tempfile.TemporaryFile()
        try:
            # -I: no script directory on sys.path (workbench/cupy would be imported instead of the cupy package)
            from workbench.registry import KERNELS_PACKAGE  # the helper cannot import it: it is told

            self.proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), "--serve", KERNELS_PACKAGE],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        except OSError as e:
            raise _GateUnavailable(f"could not start {sys.executable}: {e}") from e

    def alive(self) -> bool:
        return self.proc.poll() is None

    def compile(self, desc: dict, sig: list) -> dict:
        try:
            _send(self.proc.stdin, {"function": desc, "signature": sig, "cc": CC})
            reply = _recv(self.proc.stdout, TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, pickle.UnpicklingError) as e:
            self.close()
            raise _GateUnavailable(f"the compiler helper failed ({type(e).__name__}: {e}){self._tail()}") from e
        return reply

    def _tail(self) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; its last output: {text[-800:]}" if text else ""

    def close(self) -> None:
        """Stop the helper and close its pipes."""
        for f in (self.proc.stdin, self.proc.stdout, self.log):
            with contextlib.suppress(Exception):
                f.close()
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(5)


_HELPER: _Helper | None = None


def _helper() -> _Helper:
    global _HELPER
    if _HELPER is None or not _HELPER.alive():
        _HELPER = _Helper()
        import atexit

        atexit.register(_HELPER.close)
    return _HELPER


def _send(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=4)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream: Any, timeout: float | None = None) -> Any:
    head = _read_exactly(stream, 8, timeout)
    return pickle.loads(_read_exactly(stream, struct.unpack("<Q", head)[0], timeout))


def _read_exactly(stream: Any, n: int, timeout: float | None) -> bytes:
    import select

    fd = stream.fileno()
    buf = b""
    while len(buf) < n:
        if timeout is not None and not select.select([fd], [], [], timeout)[0]:
            raise TimeoutError(f"no answer in {timeout:.0f} s")
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("the helper exited")
        buf += chunk
    return buf


# ---------------------------------------------------------------------------------------------- the helper side
class _NoWorkbench:
    """Refuse to import the workbench or the kernels package in the helper: they switch Numba back to the simulator."""

    def __init__(self, kernels_package: str) -> None:
        self.refused = ("workbench", kernels_package)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in self.refused:
            raise ImportError(f"{name} is not importable in the Numba front-end helper")
        return None


def _stand_in(module: str, qualname: str) -> Any:
    """Return an object of a fresh class named like the original: Numba refuses it as it would the original."""
    cls = type(qualname.rsplit(".", 1)[-1], (), {"__module__": module, "__qualname__": qualname})
    return cls()


def _build_value(d: tuple) -> Any:
    """Rebuild a value :func:`describe_value` described, in the helper."""
    import importlib

    kind = d[0]
    if kind == "module":
        try:
            return importlib.import_module(d[1])
        except Exception:  # noqa: BLE001
            return _stand_in("builtins", "module")
    if kind == "small":
        import numpy as np

        if d[3] == "A":  # strided: a view that is neither C- nor F-contiguous
            return np.zeros((4,) * d[2], np.dtype(d[1]))[(slice(None, None, 2),) * d[2]]
        return np.zeros((2,) * d[2], np.dtype(d[1]), order=d[3])  # 2 per axis: F stays only F
    if kind == "namespace":
        ns = types.ModuleType(d[1])
        for k, v in d[2].items():
            setattr(ns, k, _build_value(v))
        return ns
    if kind == "jit":
        from numba import cuda

        fn = _build_function(d[1])
        return cuda.jit(device=True, fastmath=d[3])(fn) if d[2] else cuda.jit(fastmath=d[3])(fn)
    if kind == "func":
        return _build_function(d[1])
    if kind == "ref":
        obj: Any = importlib.import_module(d[1])
        for part in d[2].split("."):
            obj = getattr(obj, part)
        return obj
    if kind == "pickle":
        try:
            return pickle.loads(d[1])
        except Exception:  # noqa: BLE001  (a class from a module the helper cannot import)
            return _stand_in(d[2], d[3])
    if kind == "opaque":
        return _stand_in(d[1], d[2])
    if kind in ("enum", "enumcls"):
        cls = _enum_class(d[1], d[2], d[3])
        return cls[d[4]] if kind == "enum" else cls
    raise ValueError(f"unknown value description {kind!r}")


_ENUMS: dict[tuple, type] = {}


def _enum_class(qualname: str, is_int: bool, members: list) -> type:
    """Return the helper's copy of an enum class (one per name and members: its members compare equal)."""
    key = (qualname, is_int, tuple(map(tuple, members)))
    cls = _ENUMS.get(key)
    if cls is None:
        cls = _ENUMS[key] = (enum.IntEnum if is_int else enum.Enum)(qualname.rsplit(".", 1)[-1], members)
    return cls


def _build_function(d: dict) -> Any:
    import builtins
    import marshal

    if "recursive" in d:
        return _stand_in("builtins", "function")
    g: dict[str, Any] = {"__name__": d["module"], "__builtins__": builtins}
    code = marshal.loads(d["code"])
    cells = []
    for c in d["cells"]:
        cells.append(types.CellType() if c[0] == "empty" else types.CellType(_build_value(c)))
    fn = types.FunctionType(code, g, d["name"], tuple(_build_value(x) for x in d["defaults"]) or None,
                            tuple(cells) or None)
    g.update({k: _build_value(v) for k, v in d["globals"].items()})
    fn.__qualname__, fn.__module__ = d["qualname"], d["module"]
    return fn


def _numba_type(d: tuple) -> Any:
    import numpy as np
    from numba.cuda import types as nt
    from numba.cuda.np.numpy_support import from_dtype

    if d[0] == "array":
        return nt.Array(from_dtype(np.dtype(d[1])), d[2], d[3], readonly=d[4])
    if d[0] == "scalar":
        return from_dtype(np.dtype(d[1]))
    if d[0] == "tuple":
        return nt.BaseTuple.from_types([_numba_type(x) for x in d[1]])
    raise ValueError(f"unknown argument description {d[0]!r}")


def _compile(req: dict) -> dict:
    """Compile one request with Numba's CUDA compiler; return the verdict."""
    import warnings

    from numba import cuda

    try:
        fn = _build_function(req["function"])
        sig = tuple(_numba_type(a) for a in req["signature"])
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "internal": True, "type": type(e).__name__, "message": str(e)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cuda.compile_ptx(fn, sig, cc=tuple(req["cc"]))
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "internal": not _kernel_fault(e), "type": type(e).__name__, "message": str(e)}
    return {"ok": True}


def _kernel_fault(e: BaseException) -> bool:
    """Return whether an exception from compile_ptx is Numba refusing the kernel (not its toolchain failing)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {"NvvmSupportError", "NvvmError", "CudaSupportError", "CudaDriverError", "LinkerError"}:
        return False  # libNVVM, the driver or the linker could not run: the toolchain, not the kernel
    # Anything else compile_ptx raises is what a GPU build would raise too: typing errors, "printing unimplemented
    # for values of type array" (NotImplementedError), np.linalg needing scipy to be typed (ImportError).
    return not isinstance(e, (OSError, MemoryError, RecursionError))


class _ReferenceDevice:
    """What ``get_current_device()`` answers in the helper: a machine without a GPU compiles for ``CC``."""

    compute_capability = CC
    supports_float16 = supports_bfloat16 = True


def _no_driver_needed() -> None:
    """Make Numba's dispatcher ask for the reference GPU, not the driver (device functions compile for it)."""
    from numba.cuda import dispatcher

    def get_current_device() -> _ReferenceDevice:
        return _ReferenceDevice()

    dispatcher.get_current_device = get_current_device


def _serve(kernels_package: str) -> None:
    """Answer compile requests on stdin (length-prefixed pickles) until stdin closes."""
    sys.meta_path.insert(0, _NoWorkbench(kernels_package))
    _no_driver_needed()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log, not into the channel
    inp = sys.stdin.buffer
    while True:
        try:
            req = _recv(inp)
        except EOFError:
            return
        _send(out, _compile(req))


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"] and len(sys.argv) == 3:
    _serve(sys.argv[2])
