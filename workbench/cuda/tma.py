"""Make Hopper TMA tensor maps (``CUtensorMap``) for raw CUDA C kernels, through the driver's cuTensorMapEncodeTiled.

A tensor map is a 128-byte descriptor of a global tensor (base address, sizes, byte strides) and of the box one
``cp.async.bulk.tensor`` copy moves into shared memory (box sizes, swizzle). cupy has no API for it, so the
driver function is called through ctypes on ``libcuda.so.1``, the library every NVIDIA driver installs. The
kernel reads the map from global memory (``tensor_maps_on_device``), which PTX allows for ``.global`` maps.

Rules the driver enforces (CUDA Driver API, cuTensorMapEncodeTiled): the base address is 16-byte aligned, every
stride but the innermost is a multiple of 16 bytes, box sizes are at most 256, and with a swizzle the box's inner
extent is at most the swizzle span (128 B for ``swizzle=128``). :func:`tiled_2d_args` checks them first, so a bad
shape fails with a message naming the rule instead of a bare CUDA_ERROR_INVALID_VALUE.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass

import torch

# CUtensorMapDataType, CUtensorMapSwizzle and CUtensorMapL2promotion values (cuda.h).
DATA_TYPE = {torch.uint8: 0, torch.float16: 6, torch.float32: 7, torch.float64: 8, torch.bfloat16: 9,
             torch.int32: 3, torch.int64: 5, torch.float8_e4m3fn: 0}
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
L2_PROMOTION_256B = 3
MAP_BYTES = 128


@dataclass(frozen=True)
class TiledArgs:
    """The arguments of cuTensorMapEncodeTiled for a row-major 2-D tensor, innermost dimension first."""

    data_type: int
    global_dim: tuple[int, int]  # (columns, rows)
    global_strides: tuple[int]  # bytes between rows
    box_dim: tuple[int, int]  # (box columns, box rows)
    swizzle: int  # CUtensorMapSwizzle value


def tiled_2d_args(shape: tuple[int, int], row_stride: int, dtype: torch.dtype, data_ptr: int,
                  box_rows: int, box_cols: int, swizzle: int = 128) -> TiledArgs:
    """Return the encode arguments for a ``[rows, cols]`` tensor with ``row_stride`` elements between rows.

    Raises ValueError naming the TMA rule a shape, stride, pointer or box breaks.
    """
    if dtype not in DATA_TYPE:
        raise ValueError(f"TMA tensor map: unsupported dtype {dtype}; expected one of {sorted(map(str, DATA_TYPE))}")
    if swizzle not in SWIZZLE:
        raise ValueError(f"TMA tensor map: swizzle must be one of {sorted(SWIZZLE)} bytes, got {swizzle}")
    es = torch.empty((), dtype=dtype).element_size()
    rows, cols = (int(s) for s in shape)
    if rows < 1 or cols < 1:
        raise ValueError(f"TMA tensor map: sizes must be >= 1, got {rows}x{cols}")
    if data_ptr % 16:
        raise ValueError(f"TMA tensor map: the base address must be 16-byte aligned, got {data_ptr:#x}")
    if (row_stride * es) % 16:
        raise ValueError(f"TMA tensor map: the row stride must be a multiple of 16 bytes, got {row_stride} "
                         f"elements x {es} B = {row_stride * es} B (pad the rows to a multiple of {16 // es})")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ValueError(f"TMA tensor map: box sizes must be 1..256, got {box_rows}x{box_cols}")
    if swizzle and box_cols * es > swizzle:
        raise ValueError(f"TMA tensor map: with a {swizzle}-byte swizzle the box's inner extent must be at most "
                         f"{swizzle} B, got {box_cols} x {es} B")
    return TiledArgs(DATA_TYPE[dtype], (cols, rows), (row_stride * es,), (box_cols, box_rows), SWIZZLE[swizzle])


_libcuda = None


def _driver() -> ctypes.CDLL:
    global _libcuda
    if _libcuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"TMA tensor maps need the NVIDIA driver library libcuda.so.1, which did not load "
                               f"({e}); there is no GPU driver on this machine") from e
        lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
        lib.cuTensorMapEncodeTiled.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        if lib.cuInit(0) != 0:
            raise RuntimeError("TMA tensor maps: cuInit(0) failed; is a GPU visible to this process?")
        _libcuda = lib
    return _libcuda


def encode_tiled_2d(args: TiledArgs, data_ptr: int) -> bytes:
    """Return the 128-byte CUtensorMap for ``args`` at global address ``data_ptr`` (needs the driver)."""
    lib = _driver()
    buf = ctypes.create_string_buffer(MAP_BYTES + 64)
    addr = (ctypes.addressof(buf) + 63) // 64 * 64  # the map is 64-byte aligned
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(addr), args.data_type, 2, ctypes.c_void_p(data_ptr), (u64 * 2)(*args.global_dim),
        (u64 * 1)(*args.global_strides), (u32 * 2)(*args.box_dim), (u32 * 2)(1, 1), 0, args.swizzle,
        L2_PROMOTION_256B, 0)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {rc} for {args}")
    return ctypes.string_at(addr, MAP_BYTES)


_device_maps: OrderedDict = OrderedDict()


def tensor_maps_on_device(specs: list[tuple[torch.Tensor, int, int]], swizzle: int = 128) -> torch.Tensor:
    """Return a device buffer holding one 128-byte tensor map per ``(tensor, box_rows, box_cols)``.

    Each tensor is a row-major 2-D CUDA tensor (unit column stride). Buffers are cached by what they encode
    (address, sizes, strides, dtype, box), so timing loops do not pay for the encode and the host copy.
    """
    key = tuple((t.data_ptr(), tuple(t.shape), t.stride(0), t.dtype, br, bc) for t, br, bc in specs) + (swizzle,)
    hit = _device_maps.get(key)
    if hit is not None:
        _device_maps.move_to_end(key)
        return hit
    blobs = []
    for t, br, bc in specs:
        if t.dim() != 2 or t.stride(1) != 1:
            raise ValueError(f"TMA tensor map: need a 2-D tensor with unit column stride, got shape "
                             f"{tuple(t.shape)} strides {t.stride()}")
        args = tiled_2d_args(tuple(t.shape), t.stride(0), t.dtype, t.data_ptr(), br, bc, swizzle)
        blobs.append(encode_tiled_2d(args, t.data_ptr()))
    dev = torch.frombuffer(bytearray(b"".join(blobs)), dtype=torch.uint8).to(specs[0][0].device)
    _device_maps[key] = dev
    while len(_device_maps) > 64:
        _device_maps.popitem(last=False)
    return dev
