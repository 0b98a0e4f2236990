"""vecadd in CUDA C through workbench.cuda.RawKernel: the same source runs on a GPU and on the CPU engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec
from workbench import empty_like, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("vecadd.cu")
THREADS = 256


@register("vecadd", "cuda_grid", backend="cuda", cu_file="vecadd.cu", dtypes=("float32", "float16"),
          inspect_spec=lambda: cuda_spec(CU, "vecadd"),
          idea="CUDA C: one thread per element, ceil(n/256) blocks, `if (i < n)` guards the tail.")
def cuda_grid(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = empty_like(x)
    n = x.numel()
    blocks = max(1, (n + THREADS - 1) // THREADS)
    cuda_kernel(CU, "vecadd", x.dtype)((blocks,), (THREADS,), (to_raw(x), to_raw(y), to_raw(out), np.int32(n)))
    return out
