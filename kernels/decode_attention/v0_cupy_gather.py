"""Decode attention in CuPy array code: gather every sequence's tokens through the block table, one masked softmax.

A learner's first batched try, no loop over sequences: token t of sequence b sits in page ``block_table[b, t //
page]``, slot ``t % page``, so one fancy-indexing gather ``cache[pages, slots]`` with [B, L] index arrays (L the
longest sequence) builds dense [B, L, Hkv, D] K and V. Positions past a sequence's end must not index its junk
block-table entries (a free marker -1 or a page id past the pool): they gather the sequence's token 0 instead and
are masked afterwards. GQA is a reshape, not a copy: q [B, Hq, D] viewed as [B, Hkv, group, D] puts query head
h = kvh * group + g beside its KV head kvh. Scores past the end become -inf before the softmax, and V's rows there
are zeroed too: a probability of 0 times a NaN slot is still NaN.

What it costs: the gathered K and V are a second copy of every sequence's cache, written and read back, padded to
the longest sequence, and each step is its own kernel (the gather, the scores, the softmax, P V). In cpu mode numpy
stands in for cupy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import workbench.cupy as cp
from workbench import register

from .reference import default_scale


def gather_dense(cache: Any, table: Any, lens: Any, page: int) -> tuple[Any, Any]:
    """Return (dense [B, L, Hkv, D] float32 rows of ``cache`` per sequence, valid [B, L]): positions past a sequence's
    end hold its token 0, never a junk block-table entry's page."""
    t = cp.arange(int(lens.max()))
    valid = t[None, :] < lens[:, None]  # [B, L]
    entry = cp.where(valid, t[None, :] // page, 0)  # past the end: entry 0, a page the sequence owns
    pages = cp.take_along_axis(table, entry, axis=1)  # [B, L] page ids
    slots = cp.where(valid, t[None, :] % page, 0)
    return cache[pages, slots].astype(cp.float32), valid


@register("decode_attention", "cupy_gather", backend="cupy", supports=cp.why_unavailable,
          idea="CuPy array code: gather all pages into padded dense K/V [B,L,Hkv,D], GQA by reshape, masked softmax.")
def cupy_gather(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    if not q.numel():  # an empty batch: no sequence to gather
        return torch.empty_like(q)
    (b, hq, d), page, hkv = q.shape, k_cache.shape[1], k_cache.shape[2]
    table, lens = cp.from_torch(block_table).astype(cp.int64), cp.from_torch(seq_lens).astype(cp.int64)
    k, valid = gather_dense(cp.from_torch(k_cache), table, lens, page)
    v, _ = gather_dense(cp.from_torch(v_cache), table, lens, page)
    v = cp.where(valid[:, :, None, None], v, np.float32(0.0))  # 0 * NaN is NaN: no NaN row may reach P V
    qg = cp.from_torch(q).astype(cp.float32).reshape(b, hkv, hq // hkv, d)  # [B, Hkv, group, D]
    s = cp.einsum("bkgd,blkd->bkgl", qg, k) * np.float32(default_scale(d, scale))  # [B, Hkv, group, L]
    s = cp.where(valid[:, None, None, :], s, np.float32(-np.inf))  # keys past the end take no part
    p = cp.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    o = cp.einsum("bkgl,blkd->bkgd", p, v).reshape(b, hq, d)
    return cp.to_torch(cp.ascontiguousarray(o), q.dtype)
