"""Split-KV decode attention over a quantized paged cache in Triton: codes and per-slot scales loaded per page,
dequantized in the kernel, partials merged by decode_attention's lse merge kernel.

``q8_split_kernel``: one program per (sequence b, KV head, split s), serving the whole query group of its KV head
(a [GROUP, D] tile of q), over its split's pages (decode_attention's :func:`split_ranges` rule, ``splits`` from
decode_attention's split policy ``num_splits``). Per page it reads the page id, then the page's [PAGE, D] K codes
and its [PAGE] K scales (one fp32 per slot: the row's scale), and the same for V. The codes are converted to fp32
(``.to``: int8 and e4m3 alike) but never multiplied by their scale element by element: the K scale multiplies each
slot's score (``sum_d q_d * code_d`` then ``* k_scale``: PAGE multiplies, not PAGE * D) and the V scale each slot's
softmax weight before P V (``add_pv``). Slots past seq_lens[b] are masked on every load: their codes are junk and
their scales NaN. It writes the split's normalised fp32 partial and its log-sum-exp (an empty split: -inf), and
decode_attention's ``merge_kernel`` (``v6_triton_split.merge``) folds the splits.

The kernel calls its P V step ``add_pv`` by name, so the known-wrong kernel binds its own step in its place
(``kernels/_triton_hooks.py``'s ``with_helpers``) while the kernel stays this one.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels._triton_hooks import with_helpers
from kernels.decode_attention._host import longest, num_splits
from kernels.decode_attention.reference import default_scale
from kernels.decode_attention.v6_triton_split import merge, p2
from workbench import empty, empty_like, register

from .reference import OP_NAME


@triton.jit
def load_codes(ptr, rows, live, d, D):
    """Return the [PAGE, DP] codes of the (slot, KV head) ``rows`` as fp32 (0 where a slot is not ``live``)."""
    mask = live[:, None] & (d < D)[None, :]
    return tl.load(ptr + rows[:, None] * D + d[None, :], mask=mask, other=0.0).to(tl.float32)  # int8, e4m3: exact


@triton.jit
def add_pv(acc, pr, vq_ptr, vs_ptr, rows, live, d, D):
    """Return acc + P V over one page: each slot's softmax weight times its V scale, times its V codes."""
    vc = load_codes(vq_ptr, rows, live, d, D)
    vs = tl.load(vs_ptr + rows, mask=live, other=0.0)
    return acc + tl.sum((pr * vs[None, :])[:, :, None] * vc[None, :, :], axis=1)


@triton.jit
def q8_split_kernel(q_ptr, kq_ptr, ks_ptr, vq_ptr, vs_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page,
                    maxp, splits, scale, GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr,
                    PP: tl.constexpr):
    b, kvh, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)  # sequence, KV head, split
    g, d, slot = tl.arange(0, GP), tl.arange(0, DP), tl.arange(0, PP)
    heads = kvh * GROUP + g  # the query heads h with h // GROUP == kvh
    qmask = (g < GROUP)[:, None] & (d < D)[None, :]
    n = tl.load(lens_ptr + b)
    n_pages = tl.cdiv(n, page)
    per = tl.cdiv(n_pages, splits)  # this split's pages: [lo, hi)
    lo = tl.minimum(s * per, n_pages)
    hi = tl.minimum(lo + per, n_pages)
    q = tl.load(q_ptr + (b * Hq + heads[:, None]) * D + d[None, :], mask=qmask, other=0.0).to(tl.float32) * scale
    m = tl.full((GP,), float("-inf"), tl.float32)
    l_i = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DP), tl.float32)
    for p in range(lo, hi):
        pid = tl.load(table_ptr + b * maxp + p).to(tl.int64)
        live = (slot < page) & (p * page + slot < n)  # the last page may be partly filled
        rows = (pid * page + slot) * Hkv + kvh  # [PP] (slot, KV head) rows: the scales' index, codes at rows * D
        kc = load_codes(kq_ptr, rows, live, d, D)
        ks = tl.load(ks_ptr + rows, mask=live, other=0.0)
        sc = tl.sum(q[:, None, :] * kc[None, :, :], axis=2) * ks[None, :]  # [GP, PP]: one scale per slot
        sc = tl.where(live[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))  # finite: every page in range has a live slot
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, axis=1)
        acc = add_pv(acc * alpha[:, None], pr, vq_ptr, vs_ptr, rows, live, d, D)
        m = m_new
    out = (s * B + b) * Hq + heads  # this split's partial rows
    has = l_i > 0  # an empty split (no pages): o = 0, lse = -inf, skipped by the merge
    tl.store(o_ptr + out[:, None] * D + d[None, :], acc / tl.where(has, l_i, 1.0)[:, None], mask=qmask)
    tl.store(lse_ptr + out, tl.where(has, m + tl.log(tl.where(has, l_i, 1.0)), float("-inf")), mask=g < GROUP)


def split_attend(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor,
                 v_scale: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float | None,
                 pv: Any = None) -> torch.Tensor:
    """Run ``q8_split_kernel`` (with the P V step ``pv`` bound in place of ``add_pv``, if given) and merge its
    partials into a fresh output like q."""
    out = empty_like(q)
    b, hq, d = q.shape
    if not b:
        return out
    _, page, hkv, _ = k_q.shape
    splits = num_splits(b * hkv, -(-longest(seq_lens) // page))  # (b, KV head) programs: enough of them per SM
    o = empty((splits, b, hq, d), torch.float32, q.device)
    lse = empty((splits, b, hq), torch.float32, q.device)
    kernel = q8_split_kernel if pv is None else with_helpers(q8_split_kernel, OP_NAME, add_pv=pv)
    kernel[(b, hkv, splits)](
        q, k_q, k_scale, v_q, v_scale, block_table, seq_lens, o, lse, b, hq, hkv, d, page, block_table.shape[1],
        splits, default_scale(d, scale), GROUP=hq // hkv, GP=p2(hq // hkv), DP=p2(d), PP=p2(page))
    return merge(o, lse, out)


def _spec() -> dict:
    return triton_spec(q8_split_kernel, torch.float16,
                       types={"kq_ptr": torch.int8, "vq_ptr": torch.int8, "ks_ptr": torch.float32,
                              "vs_ptr": torch.float32, "o_ptr": torch.float32, "lse_ptr": torch.float32,
                              "table_ptr": torch.int32, "lens_ptr": torch.int32, "scale": float},
                       GROUP=4, GP=4, DP=128, PP=16, num_warps=4, num_stages=2)


@register(OP_NAME, "triton_split", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="Triton split-KV: codes + per-slot scales per page, K scale on scores, V scale on weights; lse merge.")
def triton_split(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor,
                 v_scale: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                 scale: float | None = None) -> torch.Tensor:
    return split_attend(q, k_q, k_scale, v_q, v_scale, block_table, seq_lens, scale)
