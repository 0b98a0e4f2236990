"""vecadd in CUDA C through workbench.cuda.RawKernel: the same source runs on a GPU and on the CPU engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench import empty_like, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("vecadd.cu")
THREADS = 256
_NAMES = {torch.float32: "vecadd_f32", torch.float16: "vecadd_f16"}
_kernels: dict = {}


def _kernel(dtype: torch.dtype):
    from workbench import cuda

    name = _NAMES[dtype]
    if name not in _kernels:
        _kernels[name] = cuda.RawKernel(CU, name)
    return _kernels[name]


@register("vecadd", "cuda_grid", backend="cuda", cu_file="vecadd.cu", dtypes=("float32", "float16"),
          inspect_spec=lambda: {"kind": "cuda", "code": CU, "name": "vecadd_f32", "options": ()},
          idea="CUDA C: one thread per element, ceil(n/256) blocks, `if (i < n)` guards the tail.")
def cuda_grid(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    blocks = max(1, (n + THREADS - 1) // THREADS)
    _kernel(x.dtype)((blocks,), (THREADS,), (to_raw(x), to_raw(y), to_raw(out), np.int32(n)))
    return out
