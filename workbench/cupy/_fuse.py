"""CPU stand-in for ``cupy.fuse``: the decorator with cupy's signature, running the function's array code on numpy.

On a GPU ``cupy.fuse`` traces the function once per argument types and compiles its elementwise ops (and a final
reduction) into one kernel. Here the function simply runs on numpy, which gives the same values; what the stand-in
cannot show is the single kernel (write it with ElementwiseKernel/ReductionKernel to see that code run here).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np


class Fusion:
    """A fused function (cpu mode: its array code runs on numpy); call it like the function."""

    def __init__(self, func: Callable, kernel_name: str | None = None) -> None:
        if not callable(func):
            raise TypeError(f"fuse: expected a function, got {type(func).__name__}")
        self.func = func
        self.name = kernel_name or getattr(func, "__name__", "fused")
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for k, a in enumerate(args):
            if not isinstance(a, (np.ndarray, np.generic, bool, int, float, complex)):
                raise TypeError(f"fused function {self.name!r}: argument {k} must be an array or a scalar "
                                f"(numpy arrays stand in for cupy arrays in cpu mode), got {type(a).__name__}")
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<workbench.cupy.fuse {self.name!r} (CPU stand-in: runs on numpy)>"


def fuse(*args: Any, **kwargs: Any) -> Any:
    """Fuse a function (``@fuse``, ``@fuse()`` or ``@fuse(kernel_name='k')``), like ``cupy.fuse``."""
    unknown = set(kwargs) - {"kernel_name"}
    if unknown:
        raise TypeError(f"fuse: unexpected keyword arguments {sorted(unknown)} (cupy.fuse takes kernel_name=)")
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return Fusion(args[0])
    if args:
        raise TypeError("fuse: use @fuse, @fuse() or @fuse(kernel_name='name')")
    return lambda f: Fusion(f, kwargs.get("kernel_name"))
