"""Known-wrong vecadd kernels: each keeps one classic bug so tests can assert the checker names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from workbench import empty_like, register
from workbench.interop import to_numba, to_raw
from workbench.numba_helpers import cuda, numba_supports

BLOCK = 256


@triton.jit
def add_off_by_one(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1  # BUG: off by one, the last element is never stored
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@register("vecadd", "wrong_off_by_one_mask", backend="triton", expected_diagnosis="masking",
          idea="KNOWN WRONG: the mask is `offs < n - 1`, so the last element is never written.")
def wrong_off_by_one_mask(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    add_off_by_one[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


@cuda.jit
def add_kernel(x, y, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] + y[i]


@register("vecadd", "wrong_dropped_tail", backend="numba", expected_diagnosis="masking", dtypes=("float32",),
          supports=numba_supports(),
          idea="KNOWN WRONG: launches n // 256 blocks (floor), dropping the partial last block.")
def wrong_dropped_tail(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    blocks = max(1, n // BLOCK)  # BUG: should be ceil(n / BLOCK)
    add_kernel[blocks, BLOCK](to_numba(x), to_numba(y), to_numba(out), n)
    return out


@triton.jit
def add_unmasked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))  # BUG: no mask=offs < n


@register("vecadd", "wrong_unmasked", backend="triton", expected_diagnosis="out_of_bounds",
          idea="KNOWN WRONG: loads and stores without mask=offs < n: the last program runs past the buffers.")
def wrong_unmasked(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    add_unmasked[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


@triton.jit
def add_into_x(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@register("vecadd", "wrong_in_place", backend="triton", expected_diagnosis="mutated_input",
          idea="KNOWN WRONG: adds y into x in place and returns x: the sum is right, but the caller's x is gone.")
def wrong_in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    add_into_x[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)  # BUG: writes into an input
    return x


_CU = Path(__file__).with_name("wrong_vecadd.cu")
_unguarded: list = []


@register("vecadd", "wrong_no_bounds_check", backend="cuda", cu_file="wrong_vecadd.cu", dtypes=("float32",),
          expected_diagnosis="out_of_bounds",
          idea="KNOWN WRONG: CUDA C without `if (i < n)`: the last block's extra threads read and write past n.")
def wrong_no_bounds_check(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    from workbench import cuda as wcuda

    if not _unguarded:
        _unguarded.append(wcuda.RawKernel(_CU, "vecadd_unguarded_f32"))
    out = empty_like(x)
    n = x.numel()
    _unguarded[0](((n + BLOCK - 1) // BLOCK,), (BLOCK,), (to_raw(x), to_raw(y), to_raw(out), np.int32(n)))
    return out
