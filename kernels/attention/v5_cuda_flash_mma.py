"""Attention in CUDA C, FlashAttention-2 style: mma.sync m16n8k16 with S, P and O in registers (GPU only).

The kernels live in ``attn_flash_mma.cu``, one per (padded head dim, dtype): ``attn_flash_mma_d<HD>_<f16|bf16>``
with HD in {16, 32, 64, 128}. Inline PTX (ldmatrix, mma.sync, cp.async) has no CPU-engine equivalent, so in cpu
mode the variant is refused and ``wb.inspect`` shows its sm_90 SASS instead.
"""

from __future__ import annotations

import torch

from workbench import register

from . import _cuda

CU = "attn_flash_mma.cu"
BR = 64  # query rows per block (4 warps x 16 rows): the .cu file's BR
THREADS = 128


@register("attention", "cuda_flash_mma", backend="cuda", cu_file=CU, dtypes=("float16", "bfloat16"),
          supports=_cuda.supports("cuda_flash_mma"), gpu_only=True,
          gpu_note="inline PTX: mma.sync, ldmatrix and cp.async (sm_80+)",
          inspect_spec=lambda: _cuda.spec("attn_flash_mma"),
          idea="FlashAttention-2 with mma.sync m16n8k16: S, P and O stay in registers (S accumulators reused as P "
               "fragments), cp.async K/V tiles.")
def cuda_flash_mma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: float | None = None) -> torch.Tensor:
    return _cuda.launch("attn_flash_mma", q, k, v, causal, scale, rows=BR, threads=THREADS, vec=True)
