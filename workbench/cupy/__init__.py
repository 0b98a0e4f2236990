"""CuPy for the workbench: cupy itself on a GPU; on a CPU, numpy arrays and kernels generated like cupy's.

Use it as you would ``import cupy as cp``::

    import workbench.cupy as cp
    y = cp.exp(x - x.max(axis=1, keepdims=True))            # array code: numpy in cpu mode, cupy on a GPU
    add = cp.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
    l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")

* gpu mode: ``ElementwiseKernel``, ``ReductionKernel``, ``fuse`` and every other name are cupy's.
* cpu mode: arrays are numpy arrays (``cp.exp``, ``cp.matmul``... are numpy's). ``ElementwiseKernel`` and
  ``ReductionKernel`` generate the CUDA C kernel cupy would generate (see a kernel's ``.cached_code`` after a call)
  and compile and run it on the workbench's CPU engine, so your C++ snippet is compiled and executed for real; a
  compile error names the line of your snippet and of the generated kernel. ``fuse`` runs the function on numpy.
* ``from_torch(t)`` / ``to_torch(a, dtype)`` hand torch tensors to the array library and back (zero-copy views;
  bfloat16 goes through a float32 copy, as neither numpy nor a plain cupy install has bfloat16).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench._mode import MODE

__all__ = ["MODE", "ElementwiseKernel", "ReductionKernel", "fuse", "from_torch", "to_torch", "xp",
           "why_unavailable", "KernelCompileError", "KernelTypeError"]

from workbench.cupy._compile import KernelCompileError  # noqa: E402
from workbench.cupy._types import KernelTypeError  # noqa: E402

_WHY_NOT: str | None = None  # why cupy cannot be used here (gpu mode without a working cupy install)

if MODE == "gpu":
    try:
        import cupy as _backend
        from cupy import ElementwiseKernel, ReductionKernel, fuse
    except Exception as e:  # noqa: BLE001  (ImportError, or a CUDA library cupy cannot load)
        _backend = None
        _WHY_NOT = (f"cupy is not usable in gpu mode ({type(e).__name__}: {e}); install the build for torch's CUDA: "
                    "pip install cupy-cuda13x")
        from workbench.cupy._missing import ElementwiseKernel, ReductionKernel, fuse
else:
    _backend = np
    from workbench.cupy._elementwise import ElementwiseKernel
    from workbench.cupy._fuse import fuse
    from workbench.cupy._reduction import ReductionKernel


def why_unavailable(shape: dict | None = None) -> str | None:
    """Return why the cupy backend cannot run here (gpu mode without cupy), or None; a variant's ``supports``."""
    return _WHY_NOT


def xp() -> Any:
    """Return the array module: cupy on a GPU, numpy in cpu mode."""
    if _backend is None:
        raise RuntimeError(_WHY_NOT)
    return _backend


def from_torch(t: Any) -> Any:
    """Return an array of torch tensor ``t``: a cupy view on a GPU, a numpy view in cpu mode.

    bfloat16 becomes a float32 copy (numpy has no bfloat16; cupy needs the optional ml_dtypes package for it).
    """
    import torch

    from workbench.interop import to_cupy

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"from_torch: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype == torch.bfloat16:
        t = t.float()
    return to_cupy(t)


def to_torch(a: Any, dtype: Any = None) -> Any:
    """Return array ``a`` as a torch tensor (a view), converted to ``dtype`` when given and different."""
    from workbench.interop import to_torch as _to_torch

    t = _to_torch(a)
    return t if dtype is None or t.dtype == dtype else t.to(dtype)


def _cpu_extra(name: str) -> Any:
    """Return the cupy-only names the CPU stand-in provides (asnumpy, get_array_module, RawKernel, RawModule)."""
    if name == "asnumpy":
        return lambda a, *args, **kw: np.asarray(a)
    if name == "get_array_module":
        return lambda *args: np
    if name in ("RawKernel", "RawModule"):
        from workbench import cuda

        return getattr(cuda, name)
    return None


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if MODE != "gpu":
        extra = _cpu_extra(name)
        if extra is not None:
            return extra
    if _backend is None:
        raise AttributeError(f"workbench.cupy.{name}: {_WHY_NOT}")
    try:
        return getattr(_backend, name)
    except AttributeError:
        where = "cupy" if MODE == "gpu" else "numpy (cupy's stand-in in cpu mode)"
        raise AttributeError(f"workbench.cupy has no attribute {name!r}: {where} does not define it") from None
