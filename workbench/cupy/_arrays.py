"""Array plumbing of the CPU stand-in: broadcasting, dimension reduction and the by-value CArray/CIndexer structs.

The structs have the layout of ``include/cupy/carray.cuh`` (all 8-byte fields):
``CArray<T, ndim>`` = {T* data, size, shape[ndim], strides[ndim] (bytes)}, ``CIndexer<ndim>`` = {size, shape[ndim],
index[ndim]}. They travel to the CPU engine as bytes, like any by-value struct argument of a RawKernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

INT32_MAX = 2**31 - 1


def broadcast_shape(who: str, named: Sequence[tuple[str, np.ndarray]]) -> tuple[int, ...]:
    """Return the broadcast shape of the named arrays, or raise ValueError naming the first that does not fit."""
    shape: tuple[int, ...] = ()
    so_far: list[str] = []
    for name, a in named:
        try:
            shape = np.broadcast_shapes(shape, a.shape)
        except ValueError:
            with_ = ", ".join(so_far)
            raise ValueError(f"{who}: parameter {name!r} with shape {a.shape} does not broadcast with {with_} "
                             f"(broadcast shape so far {shape})") from None
        so_far.append(f"{name!r} {a.shape}")
    return shape


def index_32_bits(a: np.ndarray) -> bool:
    """Return whether every byte offset into ``a`` fits an int32 (cupy's 32-bit indexing flag)."""
    span = sum((s - 1) * abs(st) for s, st in zip(a.shape, a.strides, strict=True)) + a.itemsize
    return a.size <= INT32_MAX and span <= INT32_MAX


def reduce_dims(arrays: list[np.ndarray], shape: tuple[int, ...]) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """Return views of ``arrays`` (all of ``shape``) over the fewest axes: size-1 axes dropped, axes merged where
    every array's strides allow it (all C-contiguous: one axis). Like cupy's ``reduce_dims=True``."""
    if len(shape) <= 1 or not arrays:
        return arrays, shape
    if all(a.flags.c_contiguous for a in arrays):
        n = math.prod(shape)
        return [np.lib.stride_tricks.as_strided(a, (n,), (a.itemsize,)) for a in arrays], (n,)
    axes = [d for d in range(len(shape)) if shape[d] != 1]
    if not axes:
        return [a.reshape(()) for a in arrays], ()
    groups: list[list[int]] = [[axes[0]]]
    for d in axes[1:]:
        last = groups[-1][-1]
        if all(a.strides[last] == a.strides[d] * shape[d] for a in arrays):
            groups[-1].append(d)
        else:
            groups.append([d])
    new_shape = tuple(math.prod(shape[d] for d in g) for g in groups)
    if new_shape == shape:
        return arrays, shape
    views = [np.lib.stride_tricks.as_strided(a, new_shape, tuple(a.strides[g[-1]] for g in groups)) for a in arrays]
    return views, new_shape


def carray_ctype(c_type: str, a: np.ndarray, ndim: int | None = None) -> str:
    """Return the kernel-parameter type cupy writes for array ``a``: ``CArray<float, 2, 1, 1, 0>``."""
    nd = a.ndim if ndim is None else ndim
    return f"CArray<{c_type}, {nd}, {int(a.flags.c_contiguous)}, {int(index_32_bits(a))}, 0>"


def pack_carray(a: np.ndarray) -> bytes:
    """Return ``a`` as the bytes of a by-value ``CArray`` (data pointer, size, shape, byte strides)."""
    fields = [a.ctypes.data, a.size, *a.shape, *a.strides]
    return np.array(fields, dtype=np.int64).tobytes()


def pack_indexer(shape: tuple[int, ...]) -> bytes:
    """Return the bytes of a by-value ``CIndexer`` over ``shape`` (its index starts at zero)."""
    fields = [math.prod(shape), *shape, *([0] * len(shape))]
    return np.array(fields, dtype=np.int64).tobytes()


def pack_scalar(v: np.generic) -> np.generic | bytes:
    """Return a scalar as the CPU engine takes it: the numpy scalar, or raw bytes for float16 (a 2-byte class)."""
    if v.dtype == np.float16:
        return v.tobytes()
    return v
