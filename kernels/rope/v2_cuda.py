"""RoPE in CUDA C: one block per token, threads striding over its heads' pairs; inv_freq, cos and sin in fp32."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, pow2_threads
from workbench import empty_like, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("rope.cu")


@register("rope", "cuda", backend="cuda", cu_file="rope.cu", inspect_spec=lambda: cuda_spec(CU, "rope"),
          idea="CUDA C: block per token, a thread per pair (strided); exp2f inv_freq, sincosf, both conventions.")
def cuda_rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0,
              interleaved: bool = False) -> torch.Tensor:
    b, s, h, d = x.shape
    out = empty_like(x)
    if out.numel() == 0:
        return out
    threads = pow2_threads(h * d // 2, lo=32, hi=256)
    cuda_kernel(CU, "rope", x.dtype)((b * s,), (threads,), (to_raw(x), to_raw(positions), to_raw(out), np.int32(h),
                                                            np.int32(d), np.float32(math.log2(theta)),
                                                            np.int32(bool(interleaved))))
    return out
