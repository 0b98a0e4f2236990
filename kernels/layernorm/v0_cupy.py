"""LayerNorm in CuPy array code, the first rung: the two-pass formula written as array calls.

Each call is one kernel and one pass over [M,N] (or over a [M,1] column): the mean, x - mean, its square, the
variance, the scale by 1/sqrt(var + eps), the multiply by w, the add of b. Two passes over the data for the
statistics (mean first, then the squares of x - mean) keep it exact where the one-pass E[x^2] - E[x]^2 cancels.
In cpu mode numpy stands in for cupy.
"""

from __future__ import annotations

import numpy as np
import torch

import workbench.cupy as cp
from workbench import empty_like, register

EPS = 1e-5


@register("layernorm", "cupy_two_pass", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: mean, x - mean, squares, variance, rsqrt, * w, + b: one [M,N] pass per call.")
def cupy_two_pass(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives
        return empty_like(x)
    a = cp.from_torch(x).astype(cp.float32, copy=False)  # fp32 statistics: fp16 squares overflow past |x| = 256
    mean = cp.mean(a, axis=1, keepdims=True)  # pass 1: [M,1]
    d = a - mean  # pass 2
    var = cp.mean(d * d, axis=1, keepdims=True)  # passes 3 and 4: biased (divide by N)
    y = d * (1.0 / cp.sqrt(var + np.float32(eps)))  # eps inside the square root; the [M,1] math is cheap
    y = y * cp.from_torch(w).astype(cp.float32, copy=False) + cp.from_torch(b).astype(cp.float32, copy=False)
    return cp.to_torch(y, x.dtype)
