"""CPU engine, arguments: turn a launch's Python arguments into the C ABI values a kernel module's entry takes.

Each parameter's type code (from the module's signature table: ``f32``, ``*cf32`` for ``const float*``, ``s12``
for a 12-byte struct, ...) decides what is accepted, as cupy would on a GPU: for a pointer, a C-contiguous numpy
array (or anything with ``__array_interface__``) or a contiguous CPU torch tensor whose element type fits the
pointee (a read-only array is flagged so that a write to it faults; a cupy array is refused in cpu mode); for a
scalar, a numpy scalar of exactly its type, or a Python bool, int (range-checked) or float only where cupy would
pass the same bytes; for a by-value struct, bytes or a numpy value of exactly its size. Anything else raises
:class:`~workbench.cuda.errors.KernelArgumentError` naming the kernel, the parameter, what it expects and what it got.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from workbench.cuda._cpu_build import KernelInfo
from workbench.cuda.errors import (
    KernelArgumentError,
)


class _PtrArg(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("bytes", ctypes.c_uint64)]



# ----------------------------------------------------------------------------------------------- arguments
_SCALAR_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "u8": np.uint8,
                  "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
                  "u64": np.uint64, "b": np.bool_}
_C_NAMES = {"f32": "float", "f64": "double", "f16": "__half", "bf16": "__nv_bfloat16", "i8": "signed char",
            "u8": "unsigned char", "i16": "short", "u16": "unsigned short", "i32": "int", "u32": "unsigned int",
            "i64": "long long", "u64": "unsigned long long", "b": "bool", "v": "void"}
_NP_NAMES = {"f32": "np.float32", "f64": "np.float64", "f16": "np.float16", "i8": "np.int8", "u8": "np.uint8",
             "i16": "np.int16", "u16": "np.uint16", "i32": "np.int32", "u32": "np.uint32", "i64": "np.int64",
             "u64": "np.uint64", "b": "np.bool_"}
_TORCH_TO_CODE = {"torch.float32": "f32", "torch.float64": "f64", "torch.float16": "f16", "torch.bfloat16": "bf16",
                  "torch.int8": "i8", "torch.uint8": "u8", "torch.int16": "i16", "torch.int32": "i32",
                  "torch.int64": "i64", "torch.bool": "b", "torch.uint16": "u16", "torch.uint32": "u32",
                  "torch.uint64": "u64"}


def _dtype_code(dt: np.dtype) -> str:
    if dt.name == "bfloat16":
        return "bf16"
    if dt.kind == "f":
        return {2: "f16", 4: "f32", 8: "f64"}.get(dt.itemsize, f"f{dt.itemsize * 8}")
    if dt.kind in "iu":
        return f"{dt.kind}{dt.itemsize * 8}"
    if dt.kind == "b":
        return "b"
    return f"s{dt.itemsize}"


def _pointee_ok(pointee: str, got: str) -> bool:
    if pointee == got or pointee in ("v", "i8", "u8", "p") or pointee.startswith("s"):
        return True
    if pointee[0] in "iu" and got[0] in "iu" and pointee[1:] == got[1:]:
        return True  # same width, other signedness: bit-compatible
    if pointee == "bf16" and got in ("u16", "i16"):
        return True  # numpy has no bfloat16: raw bits in a uint16 array
    if pointee == "b" and got == "u8":
        return True
    return False


def type_text(code: str) -> str:
    """Return the C type of a parameter type code (``*cf32`` -> ``const float*``), as messages name it."""
    if code.startswith("*"):
        c = code[1:]
        const = c.startswith("c")
        c = c[1:] if const else c
        return ("const " if const else "") + _C_NAMES.get(c, f"struct({c[1:]} bytes)" if c.startswith("s") else c) + "*"
    return _C_NAMES.get(code, f"struct of {code[1:]} bytes" if code.startswith("s") else code)


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"numpy.ndarray(dtype={v.dtype}, shape={v.shape})"
    if isinstance(v, np.generic):
        return f"np.{type(v).__name__}({v!r})"
    mod = type(v).__module__
    if mod.startswith("torch"):
        return f"torch.Tensor(dtype={getattr(v, 'dtype', '?')}, device={getattr(v, 'device', '?')})"
    if mod.startswith("cupy"):
        return f"cupy.ndarray(dtype={getattr(v, 'dtype', '?')})"
    return f"{type(v).__name__} {v!r}"[:120]


def alloc_base(a: Any) -> int:
    """Return the start of the allocation an array or tensor argument lives in (a view's owner's first byte)."""
    from workbench.profile_counters import allocation_start

    return allocation_start(a)


def convert_args(info: KernelInfo, args: tuple | list) -> tuple[Any, list[Any], list[tuple[int, ...]]]:
    """Return (void** array, keep-alive list, [(pointer, bytes, parameter index, address of the pointer, allocation,
    flags)]); flags are the runtime's WB_BUF_* bits (1: the array is read-only).

    Raises KernelArgumentError for arguments that do not match the kernel's parameters.
    """
    if not isinstance(args, (tuple, list)):
        raise KernelArgumentError(f"kernel {info.name!r}: args must be a tuple of arguments, got {_describe(args)}")
    n = len(info.codes)
    if len(args) != n:
        sig = ", ".join(f"{type_text(c)} {p.name}" for c, p in zip(info.codes, info.params, strict=True))
        raise KernelArgumentError(
            f"kernel {info.name!r} takes {n} argument{'s' if n != 1 else ''} ({sig}) but {len(args)} were given")
    keep: list[Any] = []
    bufs: list[tuple[int, ...]] = []
    arr = (ctypes.c_void_p * max(n, 1))()
    for i, (code, a) in enumerate(zip(info.codes, args, strict=True)):
        p = info.params[i]
        where = f"kernel {info.name!r}, parameter {i} {p.name!r} ({type_text(code)})"
        if code.startswith("*"):
            rec = _PtrArg()
            rec.ptr, rec.bytes, readonly = _pointer(where, code, a, keep)
            if rec.ptr and rec.bytes:
                bufs.append((rec.ptr, rec.bytes, i, ctypes.addressof(rec) + _PtrArg.ptr.offset,
                             alloc_base(keep[-1]) or rec.ptr, BUF_READONLY if readonly else 0))
        else:
            rec = _scalar(where, code, a)
        keep.append(rec)
        arr[i] = ctypes.cast(ctypes.pointer(rec), ctypes.c_void_p)
    keep.append(arr)
    return arr, keep, bufs


BUF_READONLY = 1  # the runtime's WB_BUF_READONLY: the array is not writeable (its copy is mapped read-only)


def _pointer(where: str, code: str, a: Any, keep: list) -> tuple[int | None, int, bool]:
    """Return (address, bytes, read-only) of a pointer argument; refuse what cupy would refuse."""
    pointee = code[2:] if code.startswith("*c") else code[1:]
    if a is None:
        return None, 0, False
    mod = type(a).__module__
    if mod.startswith("torch"):
        if a.device.type != "cpu":
            raise KernelArgumentError(f"{where}: got a tensor on {a.device}; the CPU engine needs CPU tensors")
        if a.requires_grad:
            raise KernelArgumentError(
                f"{where}: the tensor requires grad, and cupy refuses such tensors (torch gives no "
                "__cuda_array_interface__ for them: a kernel could write it behind autograd's back); pass "
                "t.detach()")
        if not a.is_contiguous():
            raise KernelArgumentError(f"{where}: the tensor is not contiguous; pass t.contiguous()")
        got = _TORCH_TO_CODE.get(str(a.dtype), "s?")
        if not _pointee_ok(pointee, got):
            raise KernelArgumentError(f"{where}: expected a buffer of {_C_NAMES.get(pointee, pointee)}, "
                                      f"got {_describe(a)}")
        keep.append(a)
        return a.data_ptr(), a.numel() * a.element_size(), False
    if mod.startswith("cupy"):
        raise KernelArgumentError(f"{where}: got a cupy array, but the workbench runs in cpu mode; use numpy arrays")
    if isinstance(a, (np.generic, int, float, bool)):
        raise KernelArgumentError(f"{where}: expected a numpy array (or CPU torch tensor), got a scalar {_describe(a)}")
    if not isinstance(a, np.ndarray):
        if hasattr(a, "__array_interface__"):
            a = np.asarray(a)
        else:
            raise KernelArgumentError(f"{where}: expected a numpy array (or CPU torch tensor), got {_describe(a)}")
    if not a.flags.c_contiguous:
        raise KernelArgumentError(
            f"{where}: the array is not C-contiguous (a transpose or a strided view?): the kernel would read its "
            "memory in the wrong order. Pass np.ascontiguousarray(x).")
    got = _dtype_code(a.dtype)
    if not _pointee_ok(pointee, got):
        raise KernelArgumentError(f"{where}: expected an array of {_C_NAMES.get(pointee, pointee)}, got {_describe(a)}")
    keep.append(a)
    return a.ctypes.data, a.nbytes, not a.flags.writeable


def _scalar(where: str, code: str, a: Any) -> ctypes.Array:
    """Return ``a`` as the bytes of a by-value parameter of type ``code``; refuse what a GPU would misread."""
    if code.startswith("s"):
        return _struct(where, int(code[1:]), a)
    if code in ("f16", "bf16"):
        return _half(where, code, a)
    dt = _SCALAR_DTYPES.get(code)
    if dt is None:
        raise KernelArgumentError(f"{where}: unsupported parameter type code {code!r}")
    if isinstance(a, np.ndarray):
        raise KernelArgumentError(f"{where}: expected a scalar ({_NP_NAMES[code]}), got {_describe(a)}")
    if isinstance(a, np.generic):
        if a.dtype != np.dtype(dt):
            raise KernelArgumentError(f"{where}: expected {_NP_NAMES[code]}, got {_describe(a)}; "
                                      f"the GPU would reinterpret its bytes. Convert with {_NP_NAMES[code]}(x).")
        return ctypes.create_string_buffer(a.tobytes(), a.dtype.itemsize)
    return _python_scalar(where, code, dt, a)


def _struct(where: str, size: int, a: Any) -> ctypes.Array:
    if isinstance(a, (bytes, bytearray, memoryview)):
        b = bytes(a)
    elif isinstance(a, (np.ndarray, np.void)):
        b = a.tobytes()
    else:
        raise KernelArgumentError(f"{where}: pass a by-value struct as bytes, a numpy structured scalar or a "
                                  f"small array of exactly {size} bytes; got {_describe(a)}")
    if len(b) != size:
        raise KernelArgumentError(f"{where}: expected {size} bytes, got {len(b)}")
    return ctypes.create_string_buffer(b, size)


def _half(where: str, code: str, a: Any) -> ctypes.Array:
    if code == "f16" and isinstance(a, np.float16):
        return ctypes.create_string_buffer(a.tobytes(), 2)
    if code == "bf16" and isinstance(a, np.generic) and a.dtype.name == "bfloat16":
        return ctypes.create_string_buffer(a.tobytes(), 2)
    raise KernelArgumentError(f"{where}: expected {'np.float16' if code == 'f16' else 'a bfloat16 scalar'}, "
                              f"got {_describe(a)}")


def _python_scalar(where: str, code: str, dt: type, a: Any) -> ctypes.Array:
    """Pack a Python bool/int/float only where cupy would pass the same bytes (bool, int in range, double)."""
    if isinstance(a, bool):
        if code != "b":
            raise KernelArgumentError(f"{where}: got a Python bool; pass {_NP_NAMES[code]}(x)")
        return ctypes.create_string_buffer(np.bool_(a).tobytes(), 1)
    if isinstance(a, int):
        if code[0] not in "iu":
            raise KernelArgumentError(
                f"{where}: got Python int {a}; cupy passes a Python int as a 64-bit integer (long long), which "
                f"a {_C_NAMES[code]} parameter would misread. Pass {_NP_NAMES[code]}({a}).")
        info = np.iinfo(dt)
        if not info.min <= a <= info.max:
            raise KernelArgumentError(f"{where}: {a} does not fit in {_C_NAMES[code]} [{info.min}, {info.max}]")
        return ctypes.create_string_buffer(np.array(a, dt).tobytes(), np.dtype(dt).itemsize)
    if isinstance(a, float):
        if code != "f64":
            raise KernelArgumentError(
                f"{where}: got Python float {a}; cupy passes a Python float as a double, which a "
                f"{_C_NAMES[code]} parameter would misread. Pass {_NP_NAMES[code]}({a}).")
        return ctypes.create_string_buffer(np.float64(a).tobytes(), 8)
    raise KernelArgumentError(f"{where}: expected a scalar ({_NP_NAMES[code]}), got {_describe(a)}")


