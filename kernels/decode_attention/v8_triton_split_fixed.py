"""Batch-invariant split-KV decode in Triton: every split holds a fixed number of pages, whatever the batch.

``triton_split`` chooses how many splits a sequence gets (SPLITS, tuned per (B, Hkv, maxp) on a GPU; ``cuda_split``
derives it from B x Hq against the SM count and from the batch's longest sequence) and gives each split
ceil(n_pages / SPLITS) pages. A row's keys are then summed in an order that depends on SPLITS: a partial softmax
per split, then the log-sum-exp merge. The same sequence decoded in a batch of 1 and in a batch of 64 gets another
SPLITS, so another order and other low bits: the kernel is not batch-invariant, and a served model's greedy output
can change with the server's load. Thinking Machines' "Defeating Nondeterminism in LLM Inference" (He, 2025) fixes
split-KV decoding by fixing the size of each split instead of their number; this rung does that.

``fixed_split_kernel``: split s of a sequence holds its pages [s * SPLIT_PAGES, (s + 1) * SPLIT_PAGES) (the last one
ragged), so a row's splits depend on its own length and the page size only. The grid runs ceil(maxp / SPLIT_PAGES)
splits per (sequence, KV head); those past a row's pages write lse = -inf, and the merge skips them without
changing its running sums (alpha = e^0 = 1, weight 0: acc * 1 + 0 is acc, bit for bit). Everything else is
``triton_split``'s: the GQA-grouped program, the block-table gather (``page_rows``), the online softmax
(``page_step``), the partial outputs (``store_split``) and the merge kernel. SPLIT_PAGES is 256 tokens' worth of
pages on a GPU (16 pages of 16 tokens) and 2 pages in cpu mode, where the checker's 1-5-page sequences then have one,
two and three splits. The price: the split count no longer adapts to the batch (a batch of one short sequence
gets few programs and leaves SMs idle; a large batch of long ones writes more partials than it needs).
``wb.check(..., batch_invariant=True)`` tests the property. In cpu mode ``triton_split`` and ``cuda_split`` take a
fixed 2 splits, so they pass it there too; their split kernels given a split count that follows the batch fail it
(tests/test_invariance.py runs both).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import MODE, empty, empty_like, register

from .reference import default_scale
from .v6_triton_split import load_q, load_rows, merge, p2, page_rows, page_step, softmax_start, store_split

SPLIT_TOKENS = 256  # tokens per split on a GPU (rounded down to whole pages)
CPU_SPLIT_PAGES = 2  # pages per split in cpu mode: the checker's short sequences get several splits


def split_pages(page: int) -> int:
    """Return the pages per split for a cache of ``page``-token pages: a constant of the page size, never of B."""
    return max(1, SPLIT_TOKENS // max(1, page)) if MODE == "gpu" else CPU_SPLIT_PAGES


@triton.jit
def fixed_split_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                       GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr,
                       SPLIT_PAGES: tl.constexpr):
    b, kvh, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    heads = kvh * GROUP + tl.arange(0, GP)
    q = load_q(q_ptr, b, heads, Hq, D, scale, GROUP, GP, DP)
    n = tl.load(lens_ptr + b)
    n_pages = tl.cdiv(n, page)
    lo = tl.minimum(s * SPLIT_PAGES, n_pages)  # a fixed number of pages per split: lo >= hi past the row's pages
    hi = tl.minimum(lo + SPLIT_PAGES, n_pages)
    m, l_i, acc = softmax_start(GP, DP)
    for p in range(lo, hi):
        rows, valid = page_rows(table_ptr, b, p, n, kvh, Hkv, D, page, maxp, PP)
        k = load_rows(k_ptr, rows, valid, D, DP)
        v = load_rows(v_ptr, rows, valid, D, DP)
        m, l_i, acc = page_step(q, k, v, valid, m, l_i, acc)
    store_split(o_ptr, lse_ptr, b, s, heads, m, l_i, acc, B, Hq, D, GROUP, GP, DP, 1, 1)  # every split is launched


def _spec() -> dict:
    return triton_spec(fixed_split_kernel, torch.float16, types={"o_ptr": torch.float32, "lse_ptr": torch.float32,
                                                                 "table_ptr": torch.int32, "lens_ptr": torch.int32,
                                                                 "scale": float},
                       GROUP=4, GP=4, DP=128, PP=16, SPLIT_PAGES=16, num_warps=4, num_stages=2)


@register("decode_attention", "triton_split_fixed", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="Triton split-KV with a fixed split size (pages per split), not count: batch-invariant rows.")
def triton_split_fixed(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    b, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    per = split_pages(page)
    splits = max(1, -(-block_table.shape[1] // per))  # enough for the widest table row; the rest are empty
    o = empty((splits, b, hq, d), torch.float32, q.device)
    lse = empty((splits, b, hq), torch.float32, q.device)
    if b:
        fixed_split_kernel[(b, hkv, splits)](
            q, k_cache, v_cache, block_table, seq_lens, o, lse, b, hq, hkv, d, page, block_table.shape[1],
            default_scale(d, scale), GROUP=hq // hkv, GP=p2(hq // hkv), DP=p2(d), PP=p2(page), SPLIT_PAGES=per)
    return merge(o, lse, empty_like(q))
