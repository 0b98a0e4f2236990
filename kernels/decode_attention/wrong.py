"""Known-wrong decode_attention and lse_merge kernels: ``triton_split`` (``v6_triton_split.py``) with one line changed.

``split_bug_kernel`` is ``split_kernel`` with a ``BUG`` constexpr: at each of the four places a paged decode
kernel classically goes wrong it takes the wrong line when ``BUG`` names that mistake and ``split_kernel``'s line
otherwise, so each variant differs from the right kernel by exactly one marked line (it calls the same helpers from
``v6_triton_split.py``). ``merge_no_rescale_kernel`` is ``merge_kernel`` with its step (``merge_step``) written out
and one line changed. Each mistake needs the checker's inputs to show: mixed sequence lengths (1, page, page + 1),
GQA groups with Hkv > 1, NaN in every slot no sequence owns, more than one split.

* ``wrong_tail_off_by_one``: takes seq_lens[b] - 1 as the sequence's length (the new token counted apart, as
  some code bases keep "context_len"): every sequence loses its last token, a one-token sequence everything.
  The output is the attention over a prefix of each sequence; the op's ``explain`` recomputes it: ``masking``.
* ``wrong_gqa_head_mod``: the program of KV head kvh serves the query heads with h % Hkv == kvh instead of
  h // group == kvh. Right when Hkv = 1 (MQA) or Hkv = Hq; wrong rows of whole heads otherwise, with no tile or
  tail to them: ``scattered`` (the diagnosis names the pattern, an indexing bug; the rows are the heads).
* ``wrong_reads_past_seq_len``: masks the scores of the slots past seq_lens[b] but loads the last page's V rows
  unmasked. exp(-inf) = 0 weights them, yet 0 * NaN is NaN: the NaN the checker puts in unowned slots comes
  through (zero-filled pages would have hidden it): ``computed_nan``.
* ``wrong_split_drops_partial_page``: the splits share n // page pages, whole pages only, not ceil(n / page): the
  partly filled last page is in no split. Every output is again the attention over a prefix: ``masking``.
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

from .v6_triton_split import (
    SPLIT_TUNED,
    load_partial,
    load_q,
    load_rows,
    merge,
    merge_weight,
    page_rows,
    page_step,
    softmax_start,
    split_of,
    split_partials,
    store_merged,
    store_split,
)


@triton.jit
def split_bug_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                     GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr,
                     SPLITS: tl.constexpr, MAXS: tl.constexpr, BUG: tl.constexpr):
    b, kvh, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if BUG == "gqa_head_mod":
        heads = tl.arange(0, GP) * Hkv + kvh  # BUG: the heads h % Hkv == kvh; kvh serves h // GROUP == kvh
    else:
        heads = kvh * GROUP + tl.arange(0, GP)  # the query heads h with h // GROUP == kvh (rows past GROUP: padding)
    q = load_q(q_ptr, b, heads, Hq, D, scale, GROUP, GP, DP)
    if BUG == "tail_off_by_one":
        n = tl.load(lens_ptr + b) - 1  # BUG: seq_lens[b] already counts the new token
    else:
        n = tl.load(lens_ptr + b)
    if BUG == "drops_partial_page":
        lo, hi = split_of(n // page, s, SPLITS)  # BUG: whole pages only; the partly filled last one is dropped
    else:
        lo, hi = split_of(tl.cdiv(n, page), s, SPLITS)  # this split's share of the sequence's pages
    m, l_i, acc = softmax_start(GP, DP)
    for p in range(lo, hi):
        rows, valid = page_rows(table_ptr, b, p, n, kvh, Hkv, D, page, maxp, PP)
        k = load_rows(k_ptr, rows, valid, D, DP)
        if BUG == "reads_past_seq_len":
            v = load_rows(v_ptr, rows, tl.arange(0, PP) < page, D, DP)  # BUG: the whole page, NaN slots too
        else:
            v = load_rows(v_ptr, rows, valid, D, DP)
        m, l_i, acc = page_step(q, k, v, valid, m, l_i, acc)
    store_split(o_ptr, lse_ptr, b, s, heads, m, l_i, acc, B, Hq, D, GROUP, GP, DP, SPLITS, MAXS)


@triton.jit
def merge_no_rescale_kernel(o_ptr, lse_ptr, out_ptr, S, BH, D, DP: tl.constexpr):
    r = tl.program_id(0)  # one (b, h) row
    m, l_i, acc = float("-inf"), 0.0, tl.zeros((DP,), tl.float32)
    for s in range(0, S):
        ls = tl.load(lse_ptr + s * BH + r)
        m_new, alpha, w = merge_weight(ls, m)
        o = load_partial(o_ptr, (s * BH + r) * D, ls, D, DP)
        l_i = l_i * alpha + w
        acc = acc + w * o  # BUG: l_i is rescaled by alpha when the max grows, acc is not
        m = m_new
    store_merged(out_ptr, r, acc, l_i, D, DP)


@functools.cache
def _bug_tuned() -> triton.runtime.Autotuner:
    """Return ``split_bug_kernel`` launched as ``triton_split``'s (its configs on a GPU, its one config in cpu mode)."""
    return tuned(split_bug_kernel, SPLIT_TUNED.configs, cpu_config=SPLIT_TUNED.configs[0], key=["B", "Hkv", "maxp"])


def _run(bug: str, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
         seq_lens: torch.Tensor, scale: float | None) -> torch.Tensor:
    """Run ``split_bug_kernel`` with ``BUG=bug`` and merge its splits with the right merge."""
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=_bug_tuned(), BUG=bug)
    return merge(o, lse, empty_like(q))


@register("decode_attention", "wrong_tail_off_by_one", backend="triton", bf16_dot=False, expected_diagnosis="masking",
          idea="KNOWN WRONG: takes seq_lens[b] - 1 tokens: every sequence drops its newest token.")
def wrong_tail_off_by_one(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return _run("tail_off_by_one", q, k_cache, v_cache, block_table, seq_lens, scale)


@register("decode_attention", "wrong_gqa_head_mod", backend="triton", bf16_dot=False, expected_diagnosis="scattered",
          idea="KNOWN WRONG: KV head kvh serves the query heads h % Hkv == kvh, not h // group.")
def wrong_gqa_head_mod(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return _run("gqa_head_mod", q, k_cache, v_cache, block_table, seq_lens, scale)


@register("decode_attention", "wrong_reads_past_seq_len", expected_diagnosis="computed_nan", backend="triton",
          bf16_dot=False, idea="KNOWN WRONG: loads the last page's V slots past seq_lens unmasked: 0 * NaN.")
def wrong_reads_past_seq_len(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                             seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return _run("reads_past_seq_len", q, k_cache, v_cache, block_table, seq_lens, scale)


@register("decode_attention", "wrong_split_drops_partial_page", backend="triton", bf16_dot=False,
          expected_diagnosis="masking", idea="KNOWN WRONG: the splits share n // page pages: the partly filled last "
                                              "page is in none.")
def wrong_split_drops_partial_page(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                   block_table: torch.Tensor, seq_lens: torch.Tensor,
                                   scale: float | None = None) -> torch.Tensor:
    return _run("drops_partial_page", q, k_cache, v_cache, block_table, seq_lens, scale)


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
