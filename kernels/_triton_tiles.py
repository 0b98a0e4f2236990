"""Triton device code shared by several ops' kernels: the grouped (L2-friendly) tile order, a masked tile load.

Registers nothing. gemm's ``triton_grouped`` teaches the order inline; the kernels built on it (gemm's
persistent kernel aside) call :func:`grouped_tile` instead of repeating it; gemm_fp8 loads its ``a`` tiles
with :func:`load_tile`.
"""

from __future__ import annotations

from collections.abc import Callable

import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction


class _InlineHelper(InterpretedFunction):
    """An interpreted ``@triton.jit`` helper called as plain Python from the kernel that is running.

    The interpreter's own helper call re-patches ``triton.language`` on every call (about 1 ms per program here);
    the calling kernel's launch has patched it already, so the rewritten function runs as it is. ``wb.inspect``
    still sees an ``InterpretedFunction`` and swaps a ``JITFunction`` of the same function in to compile it.
    """

    def __call__(self, *args, **kwargs):
        return self.rewrite()(*args, **kwargs)


def device_helper(fn: Callable) -> Callable:
    """Return ``triton.jit(fn)``; under the interpreter, one whose calls cost no more than inlined code."""
    jitted = triton.jit(fn)
    if isinstance(jitted, InterpretedFunction):
        jitted.__class__ = _InlineHelper
    return jitted


@device_helper
def grouped_tile(pid, n_m, n_n, GROUP_M: tl.constexpr):
    # Program pid's (tile-row, tile-column) in an n_m x n_n grid of tiles: groups of GROUP_M tile-rows, each
    # walked down its tile-rows before moving one tile-column right.
    per_group = GROUP_M * n_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(n_m - first_m, GROUP_M)  # the last group may be short
    return first_m + (pid % per_group) % group_m, (pid % per_group) // group_m


@device_helper
def load_tile(ptr, rows, cols, n_rows, n_cols):
    # The [rows, cols] tile of a row-major n_rows x n_cols matrix, 0 outside it.
    return tl.load(ptr + rows[:, None] * n_cols + cols[None, :],
                   mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols), other=0.0)
