"""Softmax in CUDA C with 16-byte loads (float4; 8 halves as 4 half2): the row read once, kept in registers."""

from __future__ import annotations

import torch

from kernels._launch import per_16_bytes, pow2_threads
from workbench import register

from ._cuda import run, spec

CU = "softmax_vec.cu"


@register("softmax", "cuda_vec", backend="cuda", cu_file=CU, inspect_spec=lambda: spec(CU, "softmax_vec"),
          alignment=16,
          idea="CUDA C: block per row, 16-byte loads, row held in registers (read once); head/tail peeled.")
def cuda_vec(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    threads = pow2_threads((n // per_16_bytes(x.dtype) + 3) // 4, lo=64)  # ~4 vectors per thread, 64..1024 threads
    return run(CU, "softmax_vec", x, grid=m, block=threads)  # alignment=16: x starts on a 16-byte boundary
