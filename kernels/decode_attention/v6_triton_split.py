"""Split-KV paged decode attention in Triton (flash-decoding), GQA-grouped, plus the log-sum-exp merge kernel.

``split_kernel``: one program per (sequence b, KV head, split s). It serves the whole query group of that KV head
(a [GROUP, D] tile of q), so each page is loaded once per group. Its pages are :func:`reference.split_ranges`'
range s (:func:`split_of`): ceil(n_pages / SPLITS) pages, the last splits ragged or empty. Per page it reads the page
id from the block table (a scalar load, :func:`page_rows`), gathers the page's [PAGE, D] K and V tiles (slots past
seq_lens[b] masked: never read, they are NaN in the checker's inputs), and runs the online softmax in fp32
(:func:`page_step`: scores by broadcast-multiply-and-sum, since decode has one query row per head, too few rows for
``tl.dot``'s 16; ``v7_triton_gqa_dot`` packs the group's rows into them). :func:`store_split` writes the split's
normalised partial output (fp32) and its log-sum-exp; an empty split writes lse = -inf. Program s = 0 also writes
-inf into the lse slots of splits SPLITS..MAXS-1, so the merge can always read MAXS of them whatever SPLITS the
tuner picked.

``merge_kernel``: one program per (b, h) folds the splits in order with the online rule (:func:`merge_step`):
m' = max(m, lse_s), acc = acc * e^(m - m') + e^(lse_s - m') o_s, l likewise; empty splits are skipped (their o is
never loaded). The same kernel is the lse_merge op's ``triton_merge``.

The ``@triton.jit`` helpers are shared: ``wrong.py``'s known-wrong kernels and ``v7_triton_gqa_dot`` call them, so
each of those listings shows only what it does differently.

On a GPU ``tuned`` autotunes SPLITS (1 to 16) per (B, Hkv, maxp): short batches of long sequences want many
splits, large batches none. Under the interpreter one config, SPLITS = 2, so the check's 1-5-page sequences have
full, ragged and empty splits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec, tuned
from workbench import MODE, empty, empty_like, register

from ._host import CPU_SPLITS
from .reference import default_scale

# The partial buffers hold MAX_SPLITS splits whatever the tuner picks; under the interpreter, the one config's.
MAX_SPLITS = 16 if MODE == "gpu" else CPU_SPLITS


# ------------------------------------------------------------------------------------- the split kernel's pieces
@triton.jit
def split_of(n_pages, s, SPLITS: tl.constexpr):
    """Return split s's pages [lo, hi): ceil(n_pages / SPLITS) each, the last ones ragged or empty (lo >= hi)."""
    per = (n_pages + SPLITS - 1) // SPLITS
    lo = tl.minimum(s * per, n_pages)
    return lo, tl.minimum(lo + per, n_pages)


@triton.jit
def load_q(q_ptr, b, heads, Hq, D, scale, GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr):
    """Return the query rows ``heads`` [GP] of sequence b as a [GP, DP] fp32 tile times ``scale`` (the GP - GROUP
    padding rows and the columns past D are 0)."""
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    mask = (g < GROUP)[:, None] & (d < D)[None, :]
    return tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=mask, other=0.0).to(tl.float32) * scale


@triton.jit
def page_rows(table_ptr, b, p, n, kvh, Hkv, D, page, maxp, PP: tl.constexpr):
    """Return (rows, valid) of sequence b's page p: the element offset of each slot's KV-head-kvh row, and which
    slots hold one of its n tokens (the last page may be partly filled). One block-table read: the gather."""
    slot = tl.arange(0, PP)
    pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)
    return ((pid * page + slot) * Hkv + kvh) * D, (slot < page) & (p * page + slot < n)


@triton.jit
def load_rows(ptr, rows, valid, D, DP: tl.constexpr):
    """Return the [PP, DP] tile of the rows at ``ptr + rows`` in the cache's dtype; the rows not ``valid`` are not
    read (0)."""
    d = tl.arange(0, DP)
    return tl.load(ptr + rows[:, None] + d[None, :], mask=valid[:, None] & (d < D)[None, :], other=0.0)


@triton.jit
def softmax_start(GP: tl.constexpr, DP: tl.constexpr):
    """Return the online softmax state (m, l, acc) of GP rows before any key: (-inf, 0, 0)."""
    return tl.full((GP,), float("-inf"), tl.float32), tl.zeros((GP,), tl.float32), tl.zeros((GP, DP), tl.float32)


@triton.jit
def softmax_fold(sc, m, l_i):
    """Fold one page's scores sc [GP, PP] (-inf where no token) into (m, l): return (m', alpha, p, l') with
    alpha = e^(m - m') the old terms' rescale and p = e^(sc - m') the page's weights; acc' = acc * alpha + p V."""
    m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in a split's range has a valid slot
    alpha = tl.exp(m - m_new)
    pr = tl.exp(sc - m_new[:, None])
    return m_new, alpha, pr, l_i * alpha + tl.sum(pr, axis=1)


@triton.jit
def page_step(q, k, v, valid, m, l_i, acc):
    """Return the online softmax state (m, l, acc) after one page of K and V tiles [PP, DP]: scores q k^T by
    broadcast-multiply-and-sum in fp32."""
    sc = tl.sum(q[:, None, :] * k.to(tl.float32)[None, :, :], axis=2)  # [GP, PP]
    m_new, alpha, pr, l_new = softmax_fold(tl.where(valid[None, :], sc, float("-inf")), m, l_i)
    return m_new, l_new, acc * alpha[:, None] + tl.sum(pr[:, :, None] * v.to(tl.float32)[None, :, :], axis=1)


@triton.jit
def store_split(o_ptr, lse_ptr, b, s, heads, m, l_i, acc, B, Hq, D, GROUP: tl.constexpr, GP: tl.constexpr,
                DP: tl.constexpr, SPLITS: tl.constexpr, MAXS: tl.constexpr):
    """Write split s's partial output acc / l (fp32) and lse = m + log l of the rows ``heads`` (an empty split:
    l = 0, lse = -inf); split 0 also marks the splits SPLITS..MAXS-1, which this launch has not, empty."""
    gmask = tl.arange(0, GP) < GROUP
    d = tl.arange(0, DP)
    row = (s * B + b) * Hq + heads
    live = l_i > 0
    safe = tl.where(live, l_i, 1.0)
    tl.store(o_ptr + row[:, None] * D + d[None, :], acc / safe[:, None], mask=gmask[:, None] & (d < D)[None, :])
    tl.store(lse_ptr + row, tl.where(live, m + tl.log(safe), float("-inf")), mask=gmask)
    if s == 0:
        for e in range(SPLITS, MAXS):
            tl.store(lse_ptr + (e * B + b) * Hq + heads, tl.full((GP,), float("-inf"), tl.float32), mask=gmask)


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                 GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr, SPLITS: tl.constexpr,
                 MAXS: tl.constexpr):
    b, kvh, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    heads = kvh * GROUP + tl.arange(0, GP)  # the query heads h with h // GROUP == kvh (rows past GROUP: padding)
    q = load_q(q_ptr, b, heads, Hq, D, scale, GROUP, GP, DP)
    n = tl.load(lens_ptr + b)
    lo, hi = split_of(tl.cdiv(n, page), s, SPLITS)  # this split's share of the sequence's pages
    m, l_i, acc = softmax_start(GP, DP)
    for p in range(lo, hi):
        rows, valid = page_rows(table_ptr, b, p, n, kvh, Hkv, D, page, maxp, PP)
        k = load_rows(k_ptr, rows, valid, D, DP)
        v = load_rows(v_ptr, rows, valid, D, DP)
        m, l_i, acc = page_step(q, k, v, valid, m, l_i, acc)
    store_split(o_ptr, lse_ptr, b, s, heads, m, l_i, acc, B, Hq, D, GROUP, GP, DP, SPLITS, MAXS)


# --------------------------------------------------------------------------------------------- the merge kernel
@triton.jit
def merge_weight(ls, m):
    """Return (m', alpha, w) for a split of lse ``ls`` met with running max m: m' = max(m, ls), alpha = e^(m - m')
    rescales what came before, w = e^(ls - m') weights the split (0 for an empty one, lse = -inf; while every split
    so far is empty, m' = -inf and both exponents are taken against 0 instead: no NaN)."""
    m_new = tl.maximum(m, ls)
    m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
    return m_new, tl.exp(m - m_ref), tl.where(ls > float("-inf"), tl.exp(ls - m_ref), 0.0)


@triton.jit
def load_partial(o_ptr, at, ls, D, DP: tl.constexpr):
    """Return the partial output row at ``o_ptr + at`` in fp32; an empty split's (lse = -inf) is not read: 0."""
    d = tl.arange(0, DP)
    rowmask = (d < D) & (tl.zeros((DP,), tl.float32) + ls > float("-inf"))
    return tl.load(o_ptr + at + d, mask=rowmask, other=0.0).to(tl.float32)


@triton.jit
def merge_step(o_ptr, lse_ptr, at, D, m, l_i, acc, DP: tl.constexpr):
    """Fold split row ``at`` (its lse at lse_ptr + at, its output at o_ptr + at * D) into the running (m, l, acc):
    both l and acc are rescaled by alpha when the max grows."""
    ls = tl.load(lse_ptr + at)
    m_new, alpha, w = merge_weight(ls, m)
    o = load_partial(o_ptr, at * D, ls, D, DP)
    return m_new, l_i * alpha + w, acc * alpha + w * o


@triton.jit
def store_merged(out_ptr, r, acc, l_i, D, DP: tl.constexpr):
    """Write row r of the merged output, acc / l in out's dtype (0 when every split was empty)."""
    d = tl.arange(0, DP)
    out = tl.where(l_i > 0, acc / tl.where(l_i > 0, l_i, 1.0), 0.0)
    tl.store(out_ptr + r * D + d, out.to(out_ptr.dtype.element_ty), mask=d < D)


@triton.jit
def merge_kernel(o_ptr, lse_ptr, out_ptr, S, BH, D, DP: tl.constexpr):
    r = tl.program_id(0)  # one (b, h) row
    m, l_i, acc = float("-inf"), 0.0, tl.zeros((DP,), tl.float32)
    for s in range(0, S):
        m, l_i, acc = merge_step(o_ptr, lse_ptr, s * BH + r, D, m, l_i, acc, DP)
    store_merged(out_ptr, r, acc, l_i, D, DP)


SPLIT_TUNED = tuned(split_kernel, [triton.Config({"SPLITS": s}, num_warps=4) for s in (1, 2, 4, 8, 16)],
                    cpu_config=triton.Config({"SPLITS": CPU_SPLITS}, num_warps=4), key=["B", "Hkv", "maxp"])


def p2(x: int) -> int:
    """Return the power of two >= x (>= 1): Triton's tile sizes."""
    return triton.next_power_of_2(max(1, int(x)))


def merge(o: torch.Tensor, lse: torch.Tensor, out: torch.Tensor, kernel=merge_kernel) -> torch.Tensor:
    """Merge partials o[S, ..., D] by lse[S, ...] into out[..., D] with ``kernel`` (one program per row)."""
    s, d = o.shape[0], o.shape[-1]
    bh = out.numel() // max(1, d)
    if bh:
        kernel[(bh,)](o, lse, out, s, bh, d, DP=p2(d))
    return out


def split_partials(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                   seq_lens: torch.Tensor, scale: float | None, kernel=SPLIT_TUNED, min_tile: int = 1,
                   **consts: object) -> tuple[torch.Tensor, ...]:
    """Return (o_partials [MAX_SPLITS, B, Hq, D] fp32, lse [MAX_SPLITS, B, Hq] fp32) of ``kernel``'s splits
    (``split_kernel``'s arguments; ``consts``: the further constexprs of a kernel that takes more; ``min_tile``: the
    least tile size GP, DP and PP may have, 16 for ``tl.dot``)."""
    b, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv

    def tile(x: int) -> int:
        return max(min_tile, p2(x))

    o = empty((MAX_SPLITS, b, hq, d), torch.float32, q.device)
    lse = empty((MAX_SPLITS, b, hq), torch.float32, q.device)
    if b:
        kernel[lambda meta: (b, hkv, meta["SPLITS"])](
            q, k_cache, v_cache, block_table, seq_lens, o, lse, b, hq, hkv, d, page, block_table.shape[1],
            default_scale(d, scale), GROUP=group, GP=tile(group), DP=tile(d), PP=tile(page), MAXS=MAX_SPLITS,
            **consts)
    return o, lse


def _spec() -> dict:
    return triton_spec(split_kernel, torch.float16, types={"o_ptr": torch.float32, "lse_ptr": torch.float32,
                                                           "table_ptr": torch.int32, "lens_ptr": torch.int32,
                                                           "scale": float},
                       GROUP=4, GP=4, DP=128, PP=16, SPLITS=4, MAXS=MAX_SPLITS, num_warps=4, num_stages=2)


@register("decode_attention", "triton_split", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="Triton split-KV: a program per (sequence, KV head, split) serves its query group; lse merge kernel.")
def triton_split(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                 seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale)
    return merge(o, lse, empty_like(q))


@register("lse_merge", "triton_merge", backend="triton", bf16_dot=False,
          inspect_spec=lambda: triton_spec(merge_kernel, torch.float16, types={"lse_ptr": torch.float32}, DP=128),
          idea="Triton: a program per (b, h) folds the splits online (max, rescale), skipping empty ones.")
def triton_merge(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    return merge(o, lse, empty_like(o[0]) if o.shape[0] else torch.zeros(o.shape[1:], dtype=o.dtype,
                                                                          device=o.device))
