"""vecadd in CuPy, the first rung: array code (``x + y``), then the same add written as a ``cupy.ElementwiseKernel``.

``x + y`` on cupy arrays launches one elementwise kernel that cupy generated for you. ``ElementwiseKernel`` lets you
write that kernel's loop body yourself (``z = x + y``) while cupy still writes the rest: the grid-stride loop over
``i``, the broadcasting index and the typed parameters. Call ``_add.cached_code`` after a run to read it. In cpu mode
numpy stands in for cupy and the generated kernel runs on the workbench's CPU engine (workbench.cupy).
"""

from __future__ import annotations

import torch

import workbench.cupy as cp
from workbench import empty_like, register

# T is a type placeholder: it takes the dtype of the arrays passed for x and y (float32, float16...).
_add = cp.ElementwiseKernel("T x, T y", "T z", "z = x + y", "vecadd")


@register("vecadd", "cupy_array", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: x + y, one elementwise kernel that cupy generates (numpy stands in on CPU).")
def cupy_array(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return cp.to_torch(cp.from_torch(x) + cp.from_torch(y), x.dtype)


@register("vecadd", "cupy_elementwise", backend="cupy", supports=cp.why_unavailable,
          idea="cupy.ElementwiseKernel('T x, T y', 'T z', 'z = x + y'): you write the loop body, cupy the kernel.")
def cupy_elementwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)  # passed as the output, so an element the kernel skips stays poisoned under the checker
    z = cp.from_torch(out)
    _add(cp.from_torch(x), cp.from_torch(y), z)
    return cp.to_torch(z, x.dtype)
