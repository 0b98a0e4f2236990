"""Parameter lists, C type names and type placeholders of cupy's kernel generators, as cupy documents them.

A parameter list is ``"T x, raw float32 y, int32 n"``: comma-separated ``[raw] type name``. A type is a numpy
dtype name (``float32``, ``int64``, ``bool``...; ``float`` is numpy's, i.e. float64) or one letter, a *type
placeholder* bound to the dtype of the arrays passed for it: outputs first, then inputs. Scalars (Python or numpy)
never bind a placeholder; they are converted to their parameter's type like numpy assigns into an array.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# numpy dtype -> the C type cupy writes for it in generated code
C_NAMES: dict[np.dtype, str] = {
    np.dtype(np.float64): "double",
    np.dtype(np.float32): "float",
    np.dtype(np.float16): "float16",
    np.dtype(np.int64): "long long",
    np.dtype(np.int32): "int",
    np.dtype(np.int16): "short",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.bool_): "bool",
}
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


class KernelTypeError(TypeError):
    """An argument's type does not fit its parameter (the message names the kernel and the parameter)."""


def c_name(dtype: np.dtype, where: str) -> str:
    """Return the C type of ``dtype`` in generated code, or raise naming ``where`` for dtypes not emulated here."""
    dt = np.dtype(dtype)
    if dt in C_NAMES:
        return C_NAMES[dt]
    if dt.kind == "c":
        why = "complex dtypes are not emulated by the CPU stand-in (cupy's thrust::complex); use a GPU"
    elif dt.name == "bfloat16":
        why = "numpy has no bfloat16, so the CPU stand-in cannot take it; use float16 or float32 here"
    else:
        why = "expected a bool, integer or float16/float32/float64 dtype"
    raise KernelTypeError(f"{where}: dtype {dt} is not supported: {why}")


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel: ``[raw] type name``."""

    name: str
    dtype: np.dtype | None  # None for a type placeholder
    ctype: str  # "float", "long long", or the placeholder letter "T"
    raw: bool
    is_const: bool

    @property
    def placeholder(self) -> str | None:
        """Return the placeholder letter, or None for a fixed type."""
        return self.ctype if self.dtype is None else None

    def __str__(self) -> str:
        t = self.placeholder or str(self.dtype)
        return f"{'raw ' if self.raw else ''}{t} {self.name}"


def parse_params(text: str, is_const: bool, who: str, what: str) -> tuple[Param, ...]:
    """Parse a parameter list such as ``"T x, raw float32 y"``; raise ValueError naming ``who``/``what``."""
    if not isinstance(text, str):
        raise TypeError(f"{who}: {what} must be a string such as 'float32 x, T y', got {type(text).__name__}")
    if not text.strip():
        return ()
    out = []
    for item in text.split(","):
        out.append(_parse_one(item, is_const, who, what))
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{who}: {what} {text!r} names {dup} more than once")
    return tuple(out)


def _parse_one(item: str, is_const: bool, who: str, what: str) -> Param:
    toks = item.split()
    if len(toks) < 2:
        raise ValueError(f"{who}: {what}: cannot parse {item.strip()!r}: expected '[raw] <type> <name>', "
                         "e.g. 'float32 x', 'T y' or 'raw T z'")
    t, name = toks[-2], toks[-1]
    raw = False
    for kw in toks[:-2]:
        if kw == "raw":
            raw = True
        elif kw == "_non_const":
            is_const = False
        else:
            raise ValueError(f"{who}: {what}: unknown keyword {kw!r} in {item.strip()!r} (only 'raw' may precede "
                             "the type)")
    if not _IDENT.match(name):
        raise ValueError(f"{who}: {what}: {name!r} is not a C identifier")
    if name == "i" or name.startswith("_"):
        raise ValueError(f"{who}: {what}: the name {name!r} is reserved (cupy uses 'i' for the loop index and "
                         "names starting with '_' internally); rename the parameter")
    if len(t) == 1:
        if not t.isalpha():
            raise ValueError(f"{who}: {what}: type placeholder {t!r} of {name!r} must be a letter such as T")
        return Param(name, None, t, raw, is_const)
    try:
        dt = np.dtype(t)
    except TypeError:
        raise ValueError(f"{who}: {what}: unknown type {t!r} for {name!r}: use a numpy dtype name (float32, float16, "
                         "int32, int64, bool, ...) or a one-letter type placeholder such as T") from None
    return Param(name, dt, c_name(dt, f"{who}: parameter {name!r}"), raw, is_const)


def decide_types(who: str, in_params: tuple[Param, ...], out_params: tuple[Param, ...],
                 in_dtypes: list[np.dtype | None], out_dtypes: list[np.dtype] | None
                 ) -> tuple[list[np.dtype], list[np.dtype], dict[str, np.dtype]]:
    """Bind the type placeholders (outputs first, then inputs) and return (in types, out types, placeholder map).

    ``in_dtypes[i]`` is the dtype of the i-th input when it is an array, None for a scalar. Raises
    :class:`KernelTypeError` naming the parameter when an array's dtype contradicts its parameter.
    """
    bound: dict[str, np.dtype] = {}
    pairs = list(zip(out_params, out_dtypes or [], strict=False)) + list(zip(in_params, in_dtypes, strict=True))
    for p, dt in pairs:
        if dt is None:
            continue
        dt = np.dtype(dt)
        if p.dtype is not None:
            if dt != p.dtype:
                raise KernelTypeError(f"{who}: type mismatch for parameter {p.name!r}: it is declared {p.dtype}, "
                                      f"got an array of {dt}")
        elif p.ctype in bound and bound[p.ctype] != dt:
            first = next(q.name for q, d in pairs if q.ctype == p.ctype and d is not None)
            raise KernelTypeError(f"{who}: type mismatch for parameter {p.name!r}: placeholder {p.ctype} is "
                                  f"{bound[p.ctype]} (from {first!r}), got an array of {dt}")
        else:
            c_name(dt, f"{who}: parameter {p.name!r}")
            bound[p.ctype] = dt
    return (_resolve(who, in_params, bound, "input"), _resolve(who, out_params, bound, "output"), dict(sorted(
        bound.items())))


def _resolve(who: str, params: tuple[Param, ...], bound: dict[str, np.dtype], what: str) -> list[np.dtype]:
    out = []
    for p in params:
        if p.dtype is not None:
            out.append(p.dtype)
        elif p.ctype in bound:
            out.append(bound[p.ctype])
        else:
            raise KernelTypeError(
                f"{who}: cannot decide type placeholder {p.ctype} of {what} parameter {p.name!r}: no array argument "
                f"has type {p.ctype} (scalars do not bind placeholders). Pass an array for a {p.ctype} parameter"
                + (", pass the output array," if what == "output" else "") + " or declare a fixed type such as "
                f"'float32 {p.name}'")
    return out


def is_scalar(a: Any) -> bool:
    """Return whether ``a`` is a scalar argument (Python bool/int/float or a numpy scalar)."""
    return isinstance(a, (bool, int, float, np.generic))


def to_scalar(who: str, p: Param, value: Any, dtype: np.dtype) -> np.generic:
    """Convert a scalar argument to ``dtype`` the way numpy assigns into an array; raise naming the parameter."""
    c_name(dtype, f"{who}: parameter {p.name!r}")
    if isinstance(value, complex) or (isinstance(value, np.generic) and np.iscomplexobj(value)):
        raise KernelTypeError(f"{who}: parameter {p.name!r} ({dtype}) got a complex scalar {value!r}")
    box = np.empty((), dtype)
    try:
        box[()] = value
    except (OverflowError, ValueError) as e:
        raise KernelTypeError(f"{who}: parameter {p.name!r} ({dtype}) cannot hold the scalar {value!r}: {e}") from None
    return box[()]


def describe(a: Any) -> str:
    """Return a short description of an argument for error messages."""
    if isinstance(a, np.ndarray):
        return f"an array of {a.dtype} with shape {a.shape}"
    if is_scalar(a):
        return f"the scalar {a!r}"
    mod = type(a).__module__
    if mod.startswith("torch"):
        return "a torch.Tensor (convert it with workbench.cupy.from_torch(t))"
    return f"a {type(a).__name__}"
