"""Attention in CuPy array code, materialised: S = QK^T * scale, P = softmax(S), O = PV, each in memory.

This is the memory picture notebook 03 starts from: S and P are [B,H,Sq,Sk] float32 arrays, O(S^2) bytes per head
written and read back, while q, k, v and o are O(S*D). FlashAttention exists to never write them. In cpu mode numpy
stands in for cupy (its matmuls are BLAS calls instead of cuBLAS).
"""

from __future__ import annotations

import math

import numpy as np
import torch

import workbench.cupy as cp
from workbench import register


@register("attention", "cupy_materialized", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: S = QK^T and P = softmax(S) materialised as [B,H,Sq,Sk] fp32 arrays, then O = PV.")
def cupy_materialized(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      scale: float | None = None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    qa, ka, va = cp.from_torch(q), cp.from_torch(k), cp.from_torch(v)
    s = cp.matmul(qa, ka.swapaxes(-1, -2)).astype(cp.float32) * np.float32(scale)  # [B,H,Sq,Sk]: the O(S^2) buffer
    if causal:  # query i sees keys j <= i (top-left aligned, as SDPA's is_causal)
        keep = cp.tril(cp.ones((q.shape[2], k.shape[2]), dtype=bool))
        s = cp.where(keep, s, np.float32(-np.inf))
    s = cp.exp(s - s.max(axis=-1, keepdims=True))  # the row softmax of notebook 02, in place of S
    p = (s / s.sum(axis=-1, keepdims=True)).astype(va.dtype)  # P: a second O(S^2) array
    return cp.to_torch(cp.matmul(p, va), q.dtype)
