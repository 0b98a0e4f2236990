"""Attention in CUDA C on tensor cores: FlashAttention with nvcuda::wmma 16x16x16 fragments (fp16/bf16).

The kernels live in ``attn_flash_wmma.cu``, one per (padded head dim, dtype): ``attn_flash_wmma_d<HD>_<f16|bf16>``
with HD in {16, 32, 64, 128}; D is zero-padded up to the next HD, so any head dim 1 <= D <= 128 runs. S = Q K^T and
O += P V run on the tensor cores with fp32 accumulators; the online softmax runs in fp32 on the S tile in shared
memory and P goes back to the input dtype for the second mma.
"""

from __future__ import annotations

import torch

from workbench import register
from workbench.interop import to_raw

from .v3_cuda_flash_simt import cu_spec, head_dim_problem, kernel, padded, prepare

CU = "attn_flash_wmma.cu"
BR = 64  # query rows per block (4 warps x 16 rows): the .cu file's BR
THREADS = 128


def _supports(shape: dict) -> str | None:
    return head_dim_problem("cuda_flash_wmma", shape["D"])


@register("attention", "cuda_flash_wmma", backend="cuda", cu_file=CU, dtypes=("float16", "bfloat16"),
          supports=_supports, inspect_spec=lambda: cu_spec(CU, "attn_flash_wmma"),
          idea="CUDA C FlashAttention on tensor cores (wmma 16x16x16): S = QK^T and O += PV as mma, fp32 online "
               "softmax on the S tile in shared memory.")
def cuda_flash_wmma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    out, args = prepare("cuda_flash_wmma", q, k, causal, scale)
    if out.numel() == 0:
        return out
    if k.shape[2] == 0:  # softmax over no keys, times an empty V: the reference gives zeros
        return out.zero_()
    fn = kernel(CU, padded(d), q.dtype, "attn_flash_wmma")
    fn(((sq + BR - 1) // BR, b * h), (THREADS,), (to_raw(q), to_raw(k), to_raw(v), to_raw(out), *args))
    return out
