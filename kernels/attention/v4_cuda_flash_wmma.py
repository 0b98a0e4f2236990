"""Attention in CUDA C on tensor cores: FlashAttention with nvcuda::wmma 16x16x16 fragments (fp16/bf16).

The kernels live in ``attn_flash_wmma.cu``, one per (padded head dim, dtype): ``attn_flash_wmma_d<HD>_<f16|bf16>``
with HD in {16, 32, 64, 128}; D is zero-padded up to the next HD, so any head dim 1 <= D <= 128 runs. S = Q K^T and
O += P V run on the tensor cores with fp32 accumulators; the online softmax runs in fp32 on the S tile in shared
memory and P goes back to the input dtype for the second mma.
"""

from __future__ import annotations

import torch

from workbench import register

from . import _cuda

CU = "attn_flash_wmma.cu"
BR = 64  # query rows per block (4 warps x 16 rows): the .cu file's BR
THREADS = 128


@register("attention", "cuda_flash_wmma", backend="cuda", cu_file=CU, dtypes=("float16", "bfloat16"),
          supports=_cuda.supports("cuda_flash_wmma"), inspect_spec=lambda: _cuda.spec("attn_flash_wmma"),
          idea="CUDA C FlashAttention on tensor cores (wmma 16x16x16): S = QK^T and O += PV as mma, fp32 online "
               "softmax on the S tile in shared memory.")
def cuda_flash_wmma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: float | None = None) -> torch.Tensor:
    return _cuda.launch("attn_flash_wmma", q, k, v, causal, scale, rows=BR, threads=THREADS)
