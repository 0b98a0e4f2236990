"""Split-KV paged decode attention in Triton (flash-decoding), GQA-grouped, plus the log-sum-exp merge kernel.

``split_kernel``: one program per (sequence b, KV head, split s). It serves the whole query group of that KV head
(a [GROUP, D] tile of q), so each page is loaded once per group. Its pages are :func:`reference.split_ranges`'
range s: ceil(n_pages / SPLITS) pages, the last splits ragged or empty. Per page it reads the page id from the block
table (a scalar load), gathers the page's [PAGE, D] K and V tiles (slots past seq_lens[b] masked: never read, they
are NaN in the checker's inputs), and runs the online softmax in fp32 (scores by broadcast-multiply-and-sum:
decode has one query row per head, too few rows for ``tl.dot``'s 16). It writes the split's normalised partial
output (fp32) and its log-sum-exp; an empty split writes lse = -inf. Program s = 0 also writes -inf into the lse
slots of splits SPLITS..MAX_SPLITS-1, so the merge can always read MAX_SPLITS of them whatever SPLITS the tuner
picked.

``merge_kernel``: one program per (b, h) folds the splits in order with the online rule: m' = max(m, lse_s),
acc = acc * e^(m - m') + e^(lse_s - m') o_s, l likewise; empty splits are skipped (their o is never loaded).
The same kernel is the lse_merge op's ``triton_merge``.

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


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
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
def merge_kernel(o_ptr, lse_ptr, out_ptr, S, BH, D, DP: tl.constexpr):
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
        acc = acc * alpha + w * o
        m = m_new
    out = tl.where(l_i > 0, acc / tl.where(l_i > 0, l_i, 1.0), 0.0)
    tl.store(out_ptr + r * D + d, out.to(out_ptr.dtype.element_ty), mask=dmask)


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
                   seq_lens: torch.Tensor, scale: float | None, kernel=SPLIT_TUNED) -> tuple[torch.Tensor, ...]:
    """Return (o_partials [MAX_SPLITS, B, Hq, D] fp32, lse [MAX_SPLITS, B, Hq] fp32) of ``kernel``'s splits."""
    b, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv
    o = empty((MAX_SPLITS, b, hq, d), torch.float32, q.device)
    lse = empty((MAX_SPLITS, b, hq), torch.float32, q.device)
    if b:
        kernel[lambda meta: (b, hkv, meta["SPLITS"])](
            q, k_cache, v_cache, block_table, seq_lens, o, lse, b, hq, hkv, d, page, block_table.shape[1],
            default_scale(d, scale), GROUP=group, GP=p2(group), DP=p2(d), PP=p2(page), MAXS=MAX_SPLITS)
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
