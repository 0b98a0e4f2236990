"""MoE in CuPy array code: route, then loop over the experts with array calls, beside the torch_loop baseline.

The same algorithm as ``torch_loop``: a softmax over the router logits, the top_k experts per token, and for each
expert its tokens gathered, two matmuls around SiLU-and-mul, and the weighted outputs added back. Every step is an
array call (a kernel, or a cuBLAS GEMM) and every intermediate goes through memory. In cpu mode numpy stands in.
"""

from __future__ import annotations

import numpy as np
import torch

import workbench.cupy as cp
from workbench import register


def route(logits, top_k: int, renormalize: bool):
    """Return (weights[T,top_k] float32, expert ids[T,top_k]) from router logits [T,E]."""
    z = logits.astype(cp.float32)
    p = cp.exp(z - z.max(axis=1, keepdims=True))
    p = p / p.sum(axis=1, keepdims=True)
    ids = cp.argsort(-p, axis=1)[:, :top_k]  # the top_k experts, best first (the contract's logits have no ties)
    w = cp.take_along_axis(p, ids, axis=1)
    if renormalize:
        w = w / w.sum(axis=1, keepdims=True)
    return w, ids


@register("moe", "cupy_loop", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: route, then per expert gather its tokens, two matmuls around SiLU*up, add back.")
def cupy_loop(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
              renormalize: bool = True) -> torch.Tensor:
    xa, w1a, w2a = cp.from_torch(x), cp.from_torch(w1), cp.from_torch(w2)
    w, ids = route(cp.from_torch(router_logits), top_k, renormalize)
    i = w2a.shape[2]
    out = cp.zeros(xa.shape, dtype=cp.float32)
    for e in cp.unique(ids).tolist():  # only the experts some token chose
        tok, slot = cp.nonzero(ids == e)  # each token picks an expert at most once: tok has no repeats
        h = cp.matmul(xa[tok], w1a[e].T)  # [n, 2I] in x's dtype (gate rows 0..I-1, up rows I..2I-1)
        g, u = h[:, :i].astype(cp.float32), h[:, i:].astype(cp.float32)
        with np.errstate(over="ignore"):  # exp(-g) overflows to inf for very negative g: silu -> -0, correct
            act = (g / (1 + cp.exp(-g)) * u).astype(xa.dtype)  # SiLU(gate) * up in fp32, stored in x's dtype
        y = cp.matmul(act, w2a[e].T)  # [n, d]
        out[tok] += y.astype(cp.float32) * w[tok, slot][:, None]
    return cp.to_torch(out, x.dtype)
