"""Array plumbing of the CPU stand-in: broadcasting, dimension reduction and the by-value CArray/CIndexer structs.

The structs have the layout of ``include/cupy/carray.cuh`` (all 8-byte fields):
``CArray<T, ndim>`` = {T* data, size, shape[ndim], strides[ndim] (bytes)} and, beyond cupy's, {long long* oob,
id}: the launch's bounds report (:class:`BoundsReport`); ``CIndexer<ndim>`` = {size, shape[ndim], index[ndim]}. They
travel to the CPU engine as bytes, like any by-value struct argument of a RawKernel.
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


class BoundsReport:
    """The slot a launch's CArrays record their first out-of-bounds index in: {found, array id, index, thread}."""

    def __init__(self, who: str, names: Sequence[str], arrays: Sequence[object]) -> None:
        self.who, self.names, self.arrays = who, list(names), list(arrays)
        self.slot = np.zeros(4, dtype=np.int64)

    def raise_if_found(self) -> None:
        """Raise :class:`workbench.cuda.errors.MemcheckError` (a __global__ access) when an index was out of bounds."""
        if not self.slot[0]:
            return
        from workbench.cuda.errors import MemcheckError

        _, ident, index, thread = (int(v) for v in self.slot)
        name = self.names[ident] if 0 <= ident < len(self.names) else f"argument {ident}"
        a = self.arrays[ident] if 0 <= ident < len(self.arrays) else None
        size, item = (a.size, a.itemsize) if isinstance(a, np.ndarray) else (0, 0)
        where = "before its start" if index < 0 else f"{index - size + 1} element(s) past its end"
        msg = (f"{self.who}: Invalid __global__ access of size {item} by thread {thread}: element {index} of "
               f"parameter {name!r} ({size} elements, {getattr(a, 'dtype', '?')}), {where} (offset {index * item:+d} "
               f"bytes from its start). Bound a raw index by {name}.size() (or the loop's _ind.size()).")
        rec = {"tool": "memcheck", "kind": "access", "space": "global", "param": name, "index": index,
               "offset": index * item, "thread": thread, "message": msg}
        raise MemcheckError(msg, [rec], 1)


def pack_carray(a: np.ndarray, report: BoundsReport | None = None, ident: int = -1) -> bytes:
    """Return ``a`` as the bytes of a by-value ``CArray`` (data pointer, size, shape, byte strides, bounds report)."""
    slot = report.slot.ctypes.data if report is not None else 0
    fields = [a.ctypes.data, a.size, *a.shape, *a.strides, slot, ident]
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
