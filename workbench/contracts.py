"""Shared input validation for op contracts: every bad input gets an error that names the op and what it expected."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from workbench.registry import OpError, dtype_name


def require_tensor(op: str, name: str, t: object, ndim: int, dtypes: Sequence[torch.dtype],
                   dims: str = "") -> torch.Tensor:
    """Check that input ``name`` of ``op`` is a contiguous ``ndim``-D tensor of an allowed dtype on the device."""
    from workbench import device

    what = f"{op}: input {name}{dims}"
    if not isinstance(t, torch.Tensor):
        raise OpError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise OpError(f"{what} must be {ndim}-D, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise OpError(f"{what} must have dtype in {[dtype_name(d) for d in dtypes]}, got {dtype_name(t.dtype)}")
    dev = device()
    if t.device.type != dev.type:
        raise OpError(f"{what} must be on device {dev.type!r} (workbench.device()), got {t.device.type!r}")
    if not t.is_contiguous():
        raise OpError(f"{what} must be contiguous (row-major); got strides {t.stride()}: call .contiguous() first")
    return t


def require_same_dtype(op: str, **tensors: torch.Tensor) -> torch.dtype:
    """Check that all ``tensors`` share one dtype and return it."""
    dts = {n: t.dtype for n, t in tensors.items()}
    if len(set(dts.values())) != 1:
        got = ", ".join(f"{n}={dtype_name(d)}" for n, d in dts.items())
        raise OpError(f"{op}: inputs must share one dtype, got {got}")
    return next(iter(dts.values()))


def require(op: str, cond: bool, msg: str) -> None:
    """Raise an OpError ``"{op}: {msg}"`` unless ``cond``."""
    if not cond:
        raise OpError(f"{op}: {msg}")


def elem_size(dtype: torch.dtype) -> int:
    """Return the size in bytes of one element of ``dtype``."""
    return torch.empty((), dtype=dtype).element_size()


def huge(dtype: torch.dtype) -> float:
    """Return a magnitude near the top of ``dtype``'s range that a sum of two still fits (3e4 in fp16, else 1e30)."""
    return 3.0e4 if dtype == torch.float16 else 1.0e30


def put_specials(x: torch.Tensor, y: torch.Tensor | None = None) -> None:
    """Write NaN, +-Inf and huge values into the first elements of ``x`` (and ``y``) in place, where they fit.

    x[0] = NaN, x[1] = +inf, y[2] = -inf, x[3] = +inf with y[3] = -inf (their sum is NaN), x[4] = y[4] = huge
    (the sum still fits the dtype): elementwise ops must carry each through as IEEE arithmetic does.
    """
    fx = x.view(-1)
    fy = y.view(-1) if y is not None else fx
    big = huge(x.dtype)
    for i, (vx, vy) in enumerate([(float("nan"), None), (float("inf"), None), (None, float("-inf")),
                                  (float("inf"), float("-inf")), (big, big)]):
        if i >= fx.numel():
            break
        if vx is not None:
            fx[i] = vx
        if vy is not None and (y is not None or vx is None):
            fy[i] = vy


def randn(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, device: torch.device,
          scale: float = 1.0) -> torch.Tensor:
    """Return N(0, scale^2) values made in float32 on the CPU from ``gen`` (reproducible anywhere), cast and moved."""
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32) * scale
    return x.to(dtype).to(device)
