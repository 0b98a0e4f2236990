"""Known-wrong decode_attention and lse_merge kernels: ``triton_split`` (``v6_triton_split.py``) with one line changed.

Each is a classic paged-decode mistake, and each needs the checker's inputs to show: mixed sequence lengths
(1, page, page + 1), GQA groups with Hkv > 1, NaN in every slot no sequence owns, more than one split.

* ``wrong_tail_off_by_one``: takes seq_lens[b] - 1 as the sequence's length (the new token counted apart, as
  some code bases keep "context_len"): every sequence loses its last token, a one-token sequence everything.
  The output is the attention over a prefix of each sequence; the op's ``explain`` recomputes it: ``masking``.
* ``wrong_gqa_head_mod``: the program of KV head kvh serves the query heads with h % Hkv == kvh instead of
  h // group == kvh. Right when Hkv = 1 (MQA) or Hkv = Hq; wrong rows of whole heads otherwise, with no tile or
  tail to them: ``scattered`` (the diagnosis names the pattern, an indexing bug; the rows are the heads).
* ``wrong_reads_past_seq_len``: masks the scores of the slots past seq_lens[b] but loads the last page's V rows
  unmasked. exp(-inf) = 0 weights them, yet 0 * NaN is NaN: the NaN the checker puts in unowned slots comes
  through (zero-filled pages would have hidden it): ``computed_nan``.
* ``wrong_split_drops_partial_page``: a split's page range ends at n // page, whole pages only: the split that
  holds a sequence's partly filled last page drops it. Every output is again the attention over a prefix:
  ``masking``.
* ``wrong_merge_no_rescale`` (decode_attention and lse_merge): the merge folds the splits online and rescales
  the running weight sum when the max grows, but not the running output: FlashAttention's online-softmax bug one
  level up. ``explain`` recomputes that merge: ``online_rescale``.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels._launch import tuned
from workbench import empty_like, register

from .v6_triton_split import SPLIT_TUNED, merge, split_partials


@triton.jit
def tail_off_by_one_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                 GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr, SPLITS: tl.constexpr,
                 MAXS: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    slot = tl.arange(0, PP)
    heads = kvh * GROUP + g  # query heads h with h // GROUP == kvh
    gmask = g < GROUP
    dmask = d < D
    n = tl.load(lens_ptr + b) - 1  # BUG: seq_lens[b] counts the new token too: attend to all n of them
    n_pages = (n + page - 1) // page
    per = (n_pages + SPLITS - 1) // SPLITS
    lo = tl.minimum(s * per, n_pages)
    hi = tl.minimum(lo + per, n_pages)
    q = tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=gmask[:, None] & dmask[None, :],
                other=0.0).to(tl.float32) * scale
    m = tl.full((GP,), float("-inf"), tl.float32)
    l_i = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DP), tl.float32)
    for p in range(lo, hi):
        pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)  # the gather: one block-table read per page
        tmask = (slot < page) & (p * page + slot < n)  # the last page may be partly filled
        rows = ((pid * page + slot) * Hkv + kvh) * D
        kv_mask = tmask[:, None] & dmask[None, :]
        k = tl.load(k_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        sc = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GP, PP]
        sc = tl.where(tmask[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in range has a valid slot
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, axis=1)
        acc = acc * alpha[:, None] + tl.sum(pr[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    row = (s * B + b) * Hq + heads  # [GP]
    live = l_i > 0
    o = acc / tl.where(live, l_i, 1.0)[:, None]
    tl.store(o_ptr + row[:, None] * D + d[None, :], o, mask=gmask[:, None] & dmask[None, :])
    tl.store(lse_ptr + row, tl.where(live, m + tl.log(tl.where(live, l_i, 1.0)), float("-inf")), mask=gmask)
    if s == 0:  # the splits this launch does not have: empty for the merge
        for e in range(SPLITS, MAXS):
            tl.store(lse_ptr + (e * B + b) * Hq + heads, tl.full((GP,), float("-inf"), tl.float32), mask=gmask)


@triton.jit
def gqa_head_mod_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                 GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr, SPLITS: tl.constexpr,
                 MAXS: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    slot = tl.arange(0, PP)
    heads = g * Hkv + kvh  # BUG: the heads with h % Hkv == kvh; KV head kvh serves h // GROUP == kvh
    gmask = g < GROUP
    dmask = d < D
    n = tl.load(lens_ptr + b)
    n_pages = (n + page - 1) // page
    per = (n_pages + SPLITS - 1) // SPLITS
    lo = tl.minimum(s * per, n_pages)
    hi = tl.minimum(lo + per, n_pages)
    q = tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=gmask[:, None] & dmask[None, :],
                other=0.0).to(tl.float32) * scale
    m = tl.full((GP,), float("-inf"), tl.float32)
    l_i = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DP), tl.float32)
    for p in range(lo, hi):
        pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)  # the gather: one block-table read per page
        tmask = (slot < page) & (p * page + slot < n)  # the last page may be partly filled
        rows = ((pid * page + slot) * Hkv + kvh) * D
        kv_mask = tmask[:, None] & dmask[None, :]
        k = tl.load(k_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        sc = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GP, PP]
        sc = tl.where(tmask[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in range has a valid slot
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, axis=1)
        acc = acc * alpha[:, None] + tl.sum(pr[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    row = (s * B + b) * Hq + heads  # [GP]
    live = l_i > 0
    o = acc / tl.where(live, l_i, 1.0)[:, None]
    tl.store(o_ptr + row[:, None] * D + d[None, :], o, mask=gmask[:, None] & dmask[None, :])
    tl.store(lse_ptr + row, tl.where(live, m + tl.log(tl.where(live, l_i, 1.0)), float("-inf")), mask=gmask)
    if s == 0:  # the splits this launch does not have: empty for the merge
        for e in range(SPLITS, MAXS):
            tl.store(lse_ptr + (e * B + b) * Hq + heads, tl.full((GP,), float("-inf"), tl.float32), mask=gmask)


@triton.jit
def reads_past_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                 GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr, SPLITS: tl.constexpr,
                 MAXS: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    slot = tl.arange(0, PP)
    heads = kvh * GROUP + g  # query heads h with h // GROUP == kvh
    gmask = g < GROUP
    dmask = d < D
    n = tl.load(lens_ptr + b)
    n_pages = (n + page - 1) // page
    per = (n_pages + SPLITS - 1) // SPLITS
    lo = tl.minimum(s * per, n_pages)
    hi = tl.minimum(lo + per, n_pages)
    q = tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=gmask[:, None] & dmask[None, :],
                other=0.0).to(tl.float32) * scale
    m = tl.full((GP,), float("-inf"), tl.float32)
    l_i = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DP), tl.float32)
    for p in range(lo, hi):
        pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)  # the gather: one block-table read per page
        tmask = (slot < page) & (p * page + slot < n)  # the last page may be partly filled
        rows = ((pid * page + slot) * Hkv + kvh) * D
        kv_mask = tmask[:, None] & dmask[None, :]
        k = tl.load(k_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + rows[:, None] + d[None, :], mask=(slot < page)[:, None] & dmask[None, :],
                    other=0.0).to(tl.float32)  # BUG: the whole page; slots past seq_lens[b] need kv_mask
        sc = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GP, PP]
        sc = tl.where(tmask[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in range has a valid slot
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, axis=1)
        acc = acc * alpha[:, None] + tl.sum(pr[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    row = (s * B + b) * Hq + heads  # [GP]
    live = l_i > 0
    o = acc / tl.where(live, l_i, 1.0)[:, None]
    tl.store(o_ptr + row[:, None] * D + d[None, :], o, mask=gmask[:, None] & dmask[None, :])
    tl.store(lse_ptr + row, tl.where(live, m + tl.log(tl.where(live, l_i, 1.0)), float("-inf")), mask=gmask)
    if s == 0:  # the splits this launch does not have: empty for the merge
        for e in range(SPLITS, MAXS):
            tl.store(lse_ptr + (e * B + b) * Hq + heads, tl.full((GP,), float("-inf"), tl.float32), mask=gmask)


@triton.jit
def drops_partial_page_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp,
                              scale, GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr,
                              SPLITS: tl.constexpr, MAXS: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    slot = tl.arange(0, PP)
    heads = kvh * GROUP + g  # query heads h with h // GROUP == kvh
    gmask = g < GROUP
    dmask = d < D
    n = tl.load(lens_ptr + b)
    n_pages = (n + page - 1) // page
    per = (n_pages + SPLITS - 1) // SPLITS
    lo = tl.minimum(s * per, n_pages)
    hi = tl.minimum(lo + per, n // page)  # BUG: whole pages only; the split ending in the last page loses it
    q = tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=gmask[:, None] & dmask[None, :],
                other=0.0).to(tl.float32) * scale
    m = tl.full((GP,), float("-inf"), tl.float32)
    l_i = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DP), tl.float32)
    for p in range(lo, hi):
        pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)  # the gather: one block-table read per page
        tmask = (slot < page) & (p * page + slot < n)  # the last page may be partly filled
        rows = ((pid * page + slot) * Hkv + kvh) * D
        kv_mask = tmask[:, None] & dmask[None, :]
        k = tl.load(k_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + rows[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        sc = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GP, PP]
        sc = tl.where(tmask[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in range has a valid slot
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, axis=1)
        acc = acc * alpha[:, None] + tl.sum(pr[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    row = (s * B + b) * Hq + heads  # [GP]
    live = l_i > 0
    o = acc / tl.where(live, l_i, 1.0)[:, None]
    tl.store(o_ptr + row[:, None] * D + d[None, :], o, mask=gmask[:, None] & dmask[None, :])
    tl.store(lse_ptr + row, tl.where(live, m + tl.log(tl.where(live, l_i, 1.0)), float("-inf")), mask=gmask)
    if s == 0:  # the splits this launch does not have: empty for the merge
        for e in range(SPLITS, MAXS):
            tl.store(lse_ptr + (e * B + b) * Hq + heads, tl.full((GP,), float("-inf"), tl.float32), mask=gmask)


@triton.jit
def merge_no_rescale_kernel(o_ptr, lse_ptr, out_ptr, S, BH, D, DP: tl.constexpr):
    r = tl.program_id(0)  # one (b, h) row
    d = tl.arange(0, DP)
    dmask = d < D
    m = float("-inf")
    l_i = 0.0
    acc = tl.zeros((DP,), tl.float32)
    for s in range(0, S):
        ls = tl.load(lse_ptr + s * BH + r)
        live = ls > float("-inf")
        m_new = tl.maximum(m, ls)
        m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)  # no live split yet: keep every exponent finite
        alpha = tl.exp(m - m_ref)
        w = tl.where(live, tl.exp(ls - m_ref), 0.0)
        rowmask = dmask & (tl.zeros((DP,), tl.float32) + ls > float("-inf"))  # an empty split's o is not read
        o = tl.load(o_ptr + (s * BH + r) * D + d, mask=rowmask, other=0.0).to(tl.float32)
        l_i = l_i * alpha + w
        acc = acc + w * o  # BUG: l_i is rescaled by alpha when the max grows, acc is not
        m = m_new
    out = tl.where(l_i > 0, acc / tl.where(l_i > 0, l_i, 1.0), 0.0)
    tl.store(out_ptr + r * D + d, out.to(out_ptr.dtype.element_ty), mask=dmask)


@functools.cache
def _tuned(kernel: triton.JITFunction) -> triton.runtime.Autotuner:
    """Return ``kernel`` launched as ``triton_split``'s (its configs on a GPU, its one config in cpu mode)."""
    return tuned(kernel, SPLIT_TUNED.configs, cpu_config=SPLIT_TUNED.configs[0], key=["B", "Hkv", "maxp"])


@register("decode_attention", "wrong_tail_off_by_one", backend="triton", bf16_dot=False,
          expected_diagnosis="masking",
          idea="KNOWN WRONG: takes seq_lens[b] - 1 tokens: every sequence drops its newest token.")
def wrong_tail_off_by_one(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=_tuned(tail_off_by_one_kernel))
    return merge(o, lse, empty_like(q))


@register("decode_attention", "wrong_gqa_head_mod", backend="triton", bf16_dot=False,
          expected_diagnosis="scattered",
          idea="KNOWN WRONG: KV head kvh serves the query heads h % Hkv == kvh, not h // group.")
def wrong_gqa_head_mod(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=_tuned(gqa_head_mod_kernel))
    return merge(o, lse, empty_like(q))


@register("decode_attention", "wrong_reads_past_seq_len", backend="triton", bf16_dot=False,
          expected_diagnosis="computed_nan",
          idea="KNOWN WRONG: loads the last page's V slots past seq_lens unmasked: 0 * NaN.")
def wrong_reads_past_seq_len(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                             seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=_tuned(reads_past_kernel))
    return merge(o, lse, empty_like(q))


@register("decode_attention", "wrong_split_drops_partial_page", backend="triton", bf16_dot=False,
          expected_diagnosis="masking",
          idea="KNOWN WRONG: a split's pages end at n // page: the partly filled last page is dropped.")
def wrong_split_drops_partial_page(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                   block_table: torch.Tensor, seq_lens: torch.Tensor,
                                   scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale,
                            kernel=_tuned(drops_partial_page_kernel))
    return merge(o, lse, empty_like(q))


@register("decode_attention", "wrong_merge_no_rescale", backend="triton", bf16_dot=False,
          expected_diagnosis="online_rescale",
          idea="KNOWN WRONG: the split merge rescales the running weight sum, not the running output.")
def wrong_merge_no_rescale(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                           seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=SPLIT_TUNED)
    return merge(o, lse, empty_like(q), kernel=merge_no_rescale_kernel)


@register("lse_merge", "wrong_merge_no_rescale", backend="triton", bf16_dot=False, expected_diagnosis="online_rescale",
          idea="KNOWN WRONG: folds the splits online, rescaling the weight sum but not the output when the max grows.")
def wrong_merge_no_rescale_lse(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    return merge(o, lse, empty_like(o[0]), kernel=merge_no_rescale_kernel)
