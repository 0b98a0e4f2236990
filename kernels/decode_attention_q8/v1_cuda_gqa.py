"""Decode attention over a quantized paged cache in CUDA C: one warp per KV head serves up to 8 query heads of its
GQA group, the byte codes decoded in registers.

``cu/decode_q8_gqa.cu``: each lane decodes its share of a token's K and V code rows once (columns lane,
lane + 32, ...) and every query head of the warp uses them, so a group of up to 8 heads reads each row from memory
once, one byte per value instead of two (fp16). The row's scale is constant along the row, so it leaves the sums:
the K scale multiplies each head's score once (after the warp_sum of q . codes), the V scale the token's softmax
weight once; the D values of a row are never dequantized one by one. int8 codes convert with one instruction,
e4m3 codes are decoded with a few integer ops (sign, exponent rebiased 7 -> 127, mantissa shifted into place), so
one .cu serves both formats: ``decode_q8_i8_<dtype>`` and ``decode_q8_e4m3_<dtype>``. The codes travel as bytes
(uint8 views: neither numpy nor DLPack knows fp8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype
from kernels.decode_attention._host import MAX_D, start
from workbench import register
from workbench.interop import to_raw

from .reference import FP8, OP_NAME

CU = "cu/decode_q8_gqa.cu"
CU_PATH = Path(__file__).parent / CU
WARPS = 4  # warps per block, each one (KV head, chunk of up to MAX_GROUP query heads)
MAX_GROUP = 8  # the .cu's MAXG: query heads per warp
CODE_NAMES = {torch.int8: "i8", FP8: "e4m3"}


def _supports(shape: dict) -> str | None:
    if shape["D"] <= MAX_D:
        return None
    return f"{OP_NAME}/cuda_gqa: head dim D <= {MAX_D} (4 columns per lane in registers), got D={shape['D']}"


def kernel(codes: torch.dtype, dtype: torch.dtype) -> Any:
    """Return the compiled ``decode_q8_<codes>_<dtype>`` kernel (NVRTC builds only q's dtype on a GPU)."""
    return cuda_kernel(CU_PATH, f"decode_q8_{CODE_NAMES[codes]}", dtype, gpu_options=only_dtype(dtype))


@register(OP_NAME, "cuda_gqa", backend="cuda", cu_file=CU, supports=_supports,
          inspect_spec=lambda: cuda_spec(CU_PATH, "decode_q8_i8", torch.float16, options=only_dtype(torch.float16)),
          idea="CUDA C: a warp per KV head decodes each code row once for 8 query heads; scales once per token.")
def cuda_gqa(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor, v_scale: torch.Tensor,
             block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    out, sc = start(q, scale)
    b, hq, d = q.shape
    if out.numel():
        _, page, hkv, _ = k_q.shape
        warps = hkv * -(-(hq // hkv) // MAX_GROUP)  # (KV head, chunk of its group) pairs per sequence
        args = (to_raw(q), to_raw(k_q.view(torch.uint8)), to_raw(k_scale), to_raw(v_q.view(torch.uint8)),
                to_raw(v_scale), to_raw(block_table), to_raw(seq_lens), to_raw(out), np.int32(hq), np.int32(hkv),
                np.int32(d), np.int32(page), np.int32(block_table.shape[1]), np.float32(sc))
        kernel(k_q.dtype, q.dtype)((-(-warps // WARPS), b), (32 * WARPS,), args)
    return out
