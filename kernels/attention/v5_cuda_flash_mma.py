"""Attention in CUDA C, FlashAttention-2 style: mma.sync m16n8k16 with S, P and O in registers (GPU only).

The kernels live in ``attn_flash_mma.cu``, one per (padded head dim, dtype): ``attn_flash_mma_d<HD>_<f16|bf16>``
with HD in {16, 32, 64, 128}. Inline PTX (ldmatrix, mma.sync, cp.async) has no CPU-engine equivalent, so in cpu
mode the variant is refused and ``wb.inspect`` shows its sm_90 SASS instead.
"""

from __future__ import annotations

import numpy as np
import torch

from workbench import register
from workbench.interop import to_raw

from .v3_cuda_flash_simt import cu_spec, head_dim_problem, kernel, padded, prepare

CU = "attn_flash_mma.cu"
BR = 64  # query rows per block (4 warps x 16 rows): the .cu file's BR
THREADS = 128


def _supports(shape: dict) -> str | None:
    return head_dim_problem("cuda_flash_mma", shape["D"])


@register("attention", "cuda_flash_mma", backend="cuda", cu_file=CU, dtypes=("float16", "bfloat16"),
          supports=_supports, gpu_only=True, gpu_note="inline PTX: mma.sync, ldmatrix and cp.async (sm_80+)",
          inspect_spec=lambda: cu_spec(CU, "attn_flash_mma"),
          idea="FlashAttention-2 with mma.sync m16n8k16: S, P and O stay in registers (S accumulators reused as P "
               "fragments), cp.async K/V tiles.")
def cuda_flash_mma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    out, args = prepare("cuda_flash_mma", q, k, causal, scale)
    if out.numel() == 0:
        return out
    if k.shape[2] == 0:  # softmax over no keys, times an empty V: the reference gives zeros
        return out.zero_()
    vec = int(d % 8 == 0 and all(t.data_ptr() % 16 == 0 for t in (q, k, v)))  # 16-byte cp.async chunks
    fn = kernel(CU, padded(d), q.dtype, "attn_flash_mma")
    fn(((sq + BR - 1) // BR, b * h), (THREADS,), (to_raw(q), to_raw(k), to_raw(v), to_raw(out), *args, np.int32(vec)))
    return out
