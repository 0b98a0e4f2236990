"""Known-wrong gemm_w8a8 kernel: the scales applied before the sum, and the sum kept in bf16.

``wrong_scale_first`` (``cu/wrong_w8a8.cu``) dequantizes each pair of int8 values (``a * scale_a[m]``,
``b * scale_b[n]``) and adds their product to a bf16 running sum: what a kernel does when it treats w8a8 as "a bf16
GEMM with a dequantize in front". Every one of the K additions rounds to bf16's 8-bit significand (up to 2^-9
relative of the running sum), so the error grows with K; the int8 products themselves are exact integers, and a
kernel that sums them in int32 and scales once (``triton_int8``, ``cuda_dp4a``) rounds only once, at the store.
It also spends a multiply per operand per k on scales that are constant along K.

What the checker says: ``precision``: every element is a little off (a fair share of the tolerance), none far off,
and the tail crosses the tolerance as K grows (K = 64 and 131).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel
from workbench import empty, register
from workbench.interop import to_raw

from .reference import OP_NAME

CU = "cu/wrong_w8a8.cu"
CU_PATH = Path(__file__).parent / CU


@register(OP_NAME, "wrong_scale_first", backend="cuda", cu_file=CU, expected_diagnosis="precision",
          idea="KNOWN WRONG: dequantizes every product first and keeps the running sum in bf16.")
def wrong_scale_first(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
                      ) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:
        return c
    grid = ((n + 15) // 16, (m + 15) // 16)
    args = (to_raw(a), to_raw(b), to_raw(scale_a), to_raw(scale_b), to_raw(c), np.int32(m), np.int32(n), np.int32(k))
    cuda_kernel(CU_PATH, "w8a8_scale_first")(grid, (16, 16), args)
    return c
