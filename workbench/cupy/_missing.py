"""Stand-ins for gpu mode without a usable cupy: kernels can be defined (variant modules import), calls say why not."""

from __future__ import annotations

from typing import Any


def _why() -> str:
    from workbench.cupy import why_unavailable

    return why_unavailable() or "cupy is not usable here"


class _Unavailable:
    """A kernel generator whose construction succeeds and whose call raises, naming the missing cupy."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: {_why()}")


class ElementwiseKernel(_Unavailable):
    """cupy.ElementwiseKernel, unavailable: cupy is not usable in this gpu-mode process."""


class ReductionKernel(_Unavailable):
    """cupy.ReductionKernel, unavailable: cupy is not usable in this gpu-mode process."""


def fuse(*args: Any, **kwargs: Any) -> Any:
    """cupy.fuse, unavailable: decorating works, calling the fused function raises."""
    def wrap(f: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            raise RuntimeError(f"fuse: {_why()}")
        return call

    if len(args) == 1 and callable(args[0]) and not kwargs:
        return wrap(args[0])
    return wrap
