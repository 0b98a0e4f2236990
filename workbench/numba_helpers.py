"""``numba.cuda`` for the numba variants, or a stand-in when numba fails to import.

A numba that fails to import (missing, a binary built for another numpy, a numba-cuda that cannot find CUDA) must
disable the numba variants only, not every op whose ladder has one: the variant modules import ``cuda``,
``float32`` and ``int32`` from here. When numba works these are numba's own objects. When it does not,
``PROBLEM`` says why; ``@cuda.jit`` still decorates (so the module, and its CUDA C or Triton variants, load), and
launching such a kernel, or any other use of ``cuda`` on the host, raises :class:`UnsupportedHere` with that
reason. :func:`numba_supports` makes a variant's ``why_not_here`` say it too, before anything is launched.
"""

from __future__ import annotations

import functools
import inspect as _inspect
from collections.abc import Callable
from typing import Any

from workbench.registry import UnsupportedHere

PROBLEM: str | None = None

try:  # workbench._mode has set NUMBA_ENABLE_CUDASIM already (import workbench comes first)
    from numba import cuda, float32, int32
except Exception as e:  # noqa: BLE001  (any failure to import numba, not only ImportError, disables it)
    PROBLEM = (f"numba failed to import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
               "the numba variants are disabled here, every other variant still runs. Reinstall numba and "
               "numba-cuda (pyproject.toml pins them) to get them back")


def _refuse(*_: Any, **__: Any) -> Any:
    raise UnsupportedHere(PROBLEM)


class _MissingKernel:
    """What ``@cuda.jit`` gives without numba: the Python function kept, any launch or call refused."""

    def __init__(self, fn: Callable | None) -> None:
        self.py_func = fn
        if fn is not None:
            functools.update_wrapper(self, fn)

    def __getitem__(self, launch: Any) -> Callable:
        return _refuse

    __call__ = _refuse


class _MissingCuda:
    """Stands in for ``numba.cuda``: ``jit`` decorates, everything else refuses with the reason."""

    @staticmethod
    def jit(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:  # @cuda.jit
            return _MissingKernel(args[0])
        return lambda fn: _MissingKernel(fn)  # @cuda.jit(...), @cuda.jit("sig", device=True)

    @staticmethod
    def is_available() -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return _refuse


if PROBLEM is not None:
    cuda = _MissingCuda()
    float32 = int32 = _refuse


def numba_supports(inner: Callable[..., str | None] | None = None) -> Callable[..., str | None]:
    """Return a variant's ``supports`` that says why numba is unusable, else defers to ``inner`` (if any).

    Keeps ``inner``'s arity: ``supports(shape)`` or ``supports(shape, dtype)`` (the registry passes the dtype only
    to the latter).
    """
    takes_dtype = inner is not None and len(_inspect.signature(inner).parameters) >= 2

    if takes_dtype:
        def supports(shape: dict, dtype: Any) -> str | None:
            return PROBLEM or inner(shape, dtype)
    else:
        def supports(shape: dict) -> str | None:
            return PROBLEM or (inner(shape) if inner is not None else None)
    return supports


__all__ = ["PROBLEM", "cuda", "float32", "int32", "numba_supports"]
