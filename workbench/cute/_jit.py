"""Run Python on CuTe's static layouts: a host-only ``@cute.jit`` function that traces a job and returns nothing.

CuTe DSL builds layouts only while a ``@cute.jit`` function is being traced. Static layouts (every shape and stride
known) are evaluated in Python during that trace: ``L.shape`` is a tuple of ints, ``L(5)`` an int. So a job that
builds layouts, evaluates them and appends plain Python values to a list runs on any machine: no GPU, no driver.
MLIR values must not leave the trace (they outlive their context and crash the process), hence the plain values.
"""


import itertools
import threading
from collections.abc import Callable
from typing import Any

_LOCK = threading.Lock()
_NONCE = itertools.count()
_RUNNER: Any = None


def _runner() -> Any:
    global _RUNNER
    if _RUNNER is None:
        try:
            from kernels._cute import import_cute  # one place decides the target arch before the DSL's import

            cutlass, cute = import_cute()
        except ImportError as e:
            raise ImportError(f"wb.cute asks CuTe itself, and the CuTe DSL is not importable here ({e}): install the "
                              "project's pin, pip install nvidia-cutlass-dsl==4.8.1 (python -m workbench doctor "
                              "says what is installed)") from e

        @cute.jit
        def run(job: cutlass.Constexpr, nonce: cutlass.Constexpr) -> None:  # nonce: a new trace every call
            job()

        _RUNNER = run
    return _RUNNER


def run(job: Callable[[], Any], *, arch: "str | None" = None) -> Any:
    """Return what ``job()`` returns, ``job`` having run inside a CuTe trace (it may call ``cutlass.cute``).

    ``arch`` (``"sm_90a"``, ``"sm_80"``) sets the architecture the atoms are checked against for this call only
    (the DSL's own setting, restored after it: kernels compiled elsewhere keep theirs).
    """
    out: list[Any] = []

    def traced() -> None:
        out.append(job())

    with _LOCK:
        fn = _runner()
        from cutlass.cutlass_dsl import CuTeDSL

        env = CuTeDSL._get_dsl().envar
        before = env.arch
        if arch is not None:
            env.arch = arch
        try:
            fn(traced, next(_NONCE))
        finally:
            env.arch = before
    if not out:
        raise RuntimeError("wb.cute: the CuTe trace did not run the job (a cached trace was reused)")
    return out[0]


def to_py(x: Any) -> Any:
    """Return a static CuTe int tuple as plain Python ints and tuples (an error names a dynamic value)."""
    if isinstance(x, tuple):
        return tuple(to_py(e) for e in x)
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"wb.cute: expected a static int from CuTe, got {x!r} ({type(x).__name__}): the layout is "
                        "not fully static")
    return int(x)
