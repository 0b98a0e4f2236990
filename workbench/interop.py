"""Hand torch tensors to numba, cupy or CUDA C kernels and back, zero-copy where the mode allows.

gpu mode: ``__cuda_array_interface__`` for numba, DLPack for cupy; cpu mode: numpy views of CPU tensors (the
Numba simulator, numpy-in-place-of-cupy and the CPU CUDA engine all take numpy arrays).

A CUDA C kernel takes a pointer, not a dtype: ``to_raw`` hands bfloat16 over as its raw 16-bit pattern (an int16
view) in both modes, so neither numpy (which has no bfloat16) nor cupy's optional ml_dtypes bfloat16 is involved.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from workbench._mode import MODE


def _no_bf16(t: torch.Tensor, who: str) -> None:
    if t.dtype == torch.bfloat16 and MODE == "cpu":
        raise TypeError(f"{who}: numpy has no bfloat16, so cpu-mode emulation cannot take a bfloat16 tensor; "
                        "use float16/float32 here, or view it as int16 for a CUDA C kernel (as_raw_bits=True)")


def to_numpy(t: torch.Tensor, as_raw_bits: bool = False) -> np.ndarray:
    """Return a numpy view of a CPU tensor (bf16 only as raw int16 bits when ``as_raw_bits``)."""
    if t.dtype == torch.bfloat16 and as_raw_bits:
        t = t.view(torch.int16)
    _no_bf16(t, "to_numpy")
    return t.detach().numpy()


def to_numba(t: torch.Tensor) -> Any:
    """Return an array numba kernels accept: a device array view in gpu mode, a numpy view in cpu mode."""
    if MODE == "cpu":
        return to_numpy(t)
    from workbench.numba_helpers import PROBLEM, cuda
    from workbench.registry import UnsupportedHere

    if PROBLEM:
        raise UnsupportedHere(PROBLEM)
    return cuda.as_cuda_array(t.detach())


def xp() -> Any:
    """Return the array module of the 'cupy' backend: cupy in gpu mode, numpy in cpu mode."""
    if MODE == "cpu":
        return np
    import cupy

    return cupy


def to_cupy(t: torch.Tensor, as_raw_bits: bool = False) -> Any:
    """Return a cupy view (gpu mode, DLPack) or a numpy view (cpu mode) of ``t``.

    ``as_raw_bits`` views bfloat16 as int16 first (same bytes), for code that only needs the memory.
    """
    if t.dtype == torch.bfloat16 and as_raw_bits:
        t = t.view(torch.int16)
    if MODE == "cpu":
        return to_numpy(t)
    import cupy

    return cupy.from_dlpack(t.detach())


def to_raw(t: torch.Tensor) -> Any:
    """Return what a CUDA C kernel argument wants: a cupy view on a GPU, a numpy view on CPU (bf16 as raw bits)."""
    return to_cupy(t, as_raw_bits=True)


def to_torch(a: Any) -> torch.Tensor:
    """Wrap a numpy, cupy or numba array as a torch tensor without copying."""
    if isinstance(a, torch.Tensor):
        return a
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a)
    if hasattr(a, "__dlpack__"):
        return torch.from_dlpack(a)
    if hasattr(a, "__cuda_array_interface__"):
        return torch.as_tensor(a, device="cuda")
    raise TypeError(f"to_torch: cannot wrap {type(a).__name__}: expected numpy, cupy or numba array")
