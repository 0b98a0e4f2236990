"""Softmax in CuPy, the first rung: five array calls, then the same math in three kernels you write with CuPy.

``cupy_unfused`` is what a numpy user writes first: max, subtract, exp, sum, divide. Each call is one kernel and
one full pass over an [M,N] array in memory, so it moves about 4x the bytes of a fused softmax
(:func:`traffic` counts them). ``cupy_reduction`` writes the row max and the row sum of exponentials as
``cupy.ReductionKernel`` and the normalisation as an ``ElementwiseKernel``: three passes, each reading x once.
``cupy_fuse`` gets the same three kernels from ``cupy.fuse``, which compiles an elementwise expression and a
final reduction into one kernel (a softmax needs two reductions, so fuse cannot make it a single kernel).
In cpu mode numpy stands in for cupy; the two kernel generators run the CUDA C they generate on the CPU engine.
"""

from __future__ import annotations

import numpy as np
import torch

import workbench.cupy as cp
from workbench import empty_like, register
from workbench.contracts import elem_size
from workbench.registry import as_dtype

# ------------------------------------------------------------------------------------------ array code, unfused


@register("softmax", "cupy_unfused", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: max, subtract, exp, sum, divide: five kernels, five passes over memory.")
def cupy_unfused(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives (numpy's max has no identity)
        return empty_like(x)
    a = cp.from_torch(x).astype(cp.float32, copy=False)  # fp16 in, fp32 math (one more pass), like torch
    with np.errstate(invalid="ignore"):  # an all -inf row gives (-inf) - (-inf) = NaN, as torch (numpy warns)
        m = a.max(axis=1, keepdims=True)  # pass 1: read x,      write the row maxima [M,1]
        z = a - m  # pass 2: read x,      write z [M,N]
        e = cp.exp(z)  # pass 3: read z,      write e [M,N]
        s = e.sum(axis=1, keepdims=True)  # pass 4: read e,      write the row sums [M,1]
        y = e / s  # pass 5: read e,      write y [M,N]
    return cp.to_torch(y, x.dtype)


# ------------------------------------------------------------------------- ReductionKernel + ElementwiseKernel

NEG_INF = "__int_as_float(0xff800000)"  # the bits of -inf: the identity of max

_row_max = cp.ReductionKernel(
    "T x", "float32 m",
    "x",  # map: each element as it is (converted to the reduce type, float)
    "max(a, b)",  # reduce: two partial maxima
    "m = a",  # post-map: store the row's maximum
    NEG_INF, "softmax_row_max", reduce_type="float")

_row_sum_exp = cp.ReductionKernel(
    "T x, float32 m", "float32 s",
    "expf((float)x - m)",  # m is the row max, broadcast along the row: exp never overflows
    "a + b",
    "s = a",
    "0", "softmax_row_sum_exp")

_normalise = cp.ElementwiseKernel(
    "T x, float32 m, float32 s", "T y",
    "y = (T)(expf((float)x - m) / s)",
    "softmax_normalise")


@register("softmax", "cupy_reduction", backend="cupy", supports=cp.why_unavailable,
          idea="cupy.ReductionKernel for the row max and the row sum of exp, an ElementwiseKernel to normalise.")
def cupy_reduction(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives (numpy's max has no identity)
        return empty_like(x)
    out = empty_like(x)
    a, y = cp.from_torch(x), cp.from_torch(out)
    m = _row_max(a, axis=1)[:, None]  # [M,1]: broadcasts along each row below
    s = _row_sum_exp(a, m, axis=1)[:, None]
    _normalise(a, m, s, y)
    return cp.to_torch(y, x.dtype)


# ----------------------------------------------------------------------------------------------------- fuse


@cp.fuse(kernel_name="softmax_sum_exp")
def _sum_exp(x, m):
    return cp.sum(cp.exp(x - m), axis=1)  # elementwise ops, then one reduction: one kernel


@cp.fuse(kernel_name="softmax_divide")
def _divide_exp(x, m, s):
    return cp.exp(x - m) / s  # subtract, exp and divide: one kernel


@register("softmax", "cupy_fuse", backend="cupy", supports=cp.why_unavailable,
          idea="cupy.fuse: exp(x - max) summed in one fused kernel and normalised in another (3 kernels in all).")
def cupy_fuse(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:  # M or N is 0: an empty result, as torch gives (numpy's max has no identity)
        return empty_like(x)
    a = cp.from_torch(x)
    with np.errstate(invalid="ignore"):  # all -inf rows give NaN, as torch (numpy warns; cupy does not)
        m = a.max(axis=1, keepdims=True).astype(cp.float32, copy=False)  # a reduction kernel; fp32 so x - m is fp32
        s = _sum_exp(a, m)[:, None]
        y = _divide_exp(a, m, s)
    return cp.to_torch(y, x.dtype)


# ------------------------------------------------------------------------------------------- bytes per pass


def traffic(M: int, N: int, dtype: torch.dtype | str = torch.float32) -> dict[str, list[tuple[str, int, int]]]:  # noqa: N803
    """Return the DRAM bytes each cupy softmax moves: {variant: [(kernel, bytes read, bytes written), ...]}.

    A model, not a measurement: every kernel reads its inputs and writes its outputs once (no cache reuse between
    kernels, as for arrays much larger than L2). ``"fused"`` is the one-kernel minimum (read x, write y).
    Intermediates of the array code are float32; fp16/bf16 inputs add a cast in and a cast out.
    """
    e, f = int(elem_size(as_dtype(dtype))), 4
    mn, m = M * N, M
    cast_in = [("astype(float32)", mn * e, mn * f)] if e != f else []
    cast_out = [("astype(input dtype)", mn * f, mn * e)] if e != f else []
    small_cast = [("astype(float32) of the maxima", m * e, m * f)] if e != f else []
    unfused = cast_in + [("max", mn * f, m * f), ("subtract", mn * f + m * f, mn * f), ("exp", mn * f, mn * f),
                         ("sum", mn * f, m * f), ("divide", mn * f + m * f, mn * f)] + cast_out
    reduction = [("row_max", mn * e, m * f), ("row_sum_exp", mn * e + m * f, m * f),
                 ("normalise", mn * e + 2 * m * f, mn * e)]
    fuse = [("max", mn * e, m * e)] + small_cast + [("sum_exp", mn * e + m * f, m * f),
                                                    ("divide", mn * e + 2 * m * f, mn * f)] + cast_out
    return {"cupy_unfused": unfused, "cupy_reduction": reduction, "cupy_fuse": fuse,
            "fused": [("softmax", mn * e, mn * e)]}
