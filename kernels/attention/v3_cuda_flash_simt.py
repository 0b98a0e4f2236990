"""Attention in CUDA C, FlashAttention in SIMT: Q in registers, K/V tiles in shared memory, online softmax.

The kernels live in ``attn_flash_simt.cu``, one per (padded head dim, dtype): ``attn_flash_simt_d<HD>_<f32|f16|bf16>``
with HD in {16, 32, 64, 128}; D is zero-padded up to the next HD, so any head dim 1 <= D <= 128 runs. The launch
(head-dim check, arguments, kernel cache) is ``_cuda.launch``, shared with the tensor-core variants.
"""

from __future__ import annotations

import torch

from workbench import register

from . import _cuda

CU = "attn_flash_simt.cu"
BR, G = 32, 4  # query rows per block, threads per row: 128 threads (the .cu file's BR and G)


@register("attention", "cuda_flash_simt", backend="cuda", cu_file=CU, supports=_cuda.supports("cuda_flash_simt"),
          inspect_spec=lambda: _cuda.spec("attn_flash_simt"),
          idea="CUDA C FlashAttention in SIMT: Q tile in registers, K/V tiles in shared memory, online softmax, "
               "O(N) memory.")
def cuda_flash_simt(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: float | None = None) -> torch.Tensor:
    return _cuda.launch("attn_flash_simt", q, k, v, causal, scale, rows=BR, threads=BR * G)
