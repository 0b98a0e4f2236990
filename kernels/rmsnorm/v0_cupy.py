"""RMSNorm in CuPy, the first rung: array code, then a ReductionKernel for the row sum of squares.

``cupy_array`` squares, averages, scales and multiplies with array calls, a pass over [M,N] each. ``cupy_reduction``
computes each row's sum of squares with ``cupy.ReductionKernel`` (map ``x*x``, reduce ``a + b``, identity 0, in
float so fp16 squares cannot overflow) and applies the scale with one ``ElementwiseKernel`` in which the per-row sum
``ss[:, None]`` and the weight ``w[N]`` broadcast against x. In cpu mode numpy stands in for cupy; the generated
kernels run on the CPU engine.
"""

from __future__ import annotations

import numpy as np
import torch

import workbench.cupy as cp
from workbench import empty_like, register

EPS = 1e-6


@register("rmsnorm", "cupy_array", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: square, mean, rsqrt, two multiplies: an [M,N] pass per call.")
def cupy_array(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives (numpy's max has no identity)
        return empty_like(x)
    a = cp.from_torch(x).astype(cp.float32, copy=False)  # fp32 math: fp16 squares overflow past |x| = 256
    ms = cp.mean(a * a, axis=1, keepdims=True)  # square (a pass), then the row means (a pass)
    y = a * (1.0 / cp.sqrt(ms + np.float32(eps)))  # [M,1] math is cheap; the multiply is a pass
    y = y * cp.from_torch(w).astype(cp.float32, copy=False)  # and one more
    return cp.to_torch(y, x.dtype)


_sum_squares = cp.ReductionKernel(
    "T x", "float32 ss",
    "(float)x * (float)x",  # map: square in float
    "a + b",  # reduce: add partial sums
    "ss = a",  # post-map: store the row's sum
    "0", "rmsnorm_sum_squares")

_scale = cp.ElementwiseKernel(
    "T x, float32 ss, T w, float32 inv_n, float32 eps", "T y",
    "y = (T)((float)x * rsqrtf(ss * inv_n + eps) * (float)w)",
    "rmsnorm_scale")


@register("rmsnorm", "cupy_reduction", backend="cupy", supports=cp.why_unavailable,
          idea="cupy.ReductionKernel for each row's sum of squares, then one ElementwiseKernel scales x by rsqrt * w.")
def cupy_reduction(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives (numpy's max has no identity)
        return empty_like(x)
    out = empty_like(x)
    a, y = cp.from_torch(x), cp.from_torch(out)
    ss = _sum_squares(a, axis=1)  # [M] float32
    _scale(a, ss[:, None], cp.from_torch(w), 1.0 / x.shape[1], eps, y)  # Python floats become float32 scalars
    return cp.to_torch(y, x.dtype)
