"""Known-wrong moe_topk kernel: the Triton router with ties broken to the higher expert id.

``wrong_ties_high_id`` is ``triton_topk``'s kernel with one line changed: among the columns that hold a row's
maximum it takes the largest index (``tl.max``) where the contract says the lower expert id wins (``tl.min``).
With distinct logits nothing changes: the bug only shows when two experts have exactly the same logit, which
random tests almost never make and real routers do (a bf16 logit has 8 bits of mantissa; quantized or saturated
routers tie often). Then the token goes to another expert than the reference model's, and the outputs of every
later layer differ: routing must be deterministic and match the contract's tie rule, not merely be "a" top-k.

What the checker says: ``scattered``. The weights of tied experts are equal, so only ``ids`` is wrong, in the
checker's "ties" case (three logit levels), at the slots where a tie was broken: no tail or tile pattern.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe_topk.reference import outputs
from kernels.moe_topk.v2_triton_topk import _supports, tiles
from workbench import register


@triton.jit
def moe_topk_ties_high_kernel(x_ptr, w_ptr, ids_ptr, T, E, top_k, RENORM: tl.constexpr, BLOCK_T: tl.constexpr,
                              BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    # x: [T, E] logits; w: [T, top_k] fp32; ids: [T, top_k] int32.
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    kcol = tl.arange(0, BLOCK_K)
    row_ok = rows < T
    col_ok = cols < E
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * E + cols[None, :], mask=row_ok[:, None] & col_ok[None, :],
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    m = tl.where(row_ok, m, 0.0)  # rows past T: keep the arithmetic finite (they are never stored)
    s = tl.sum(tl.exp(x - m[:, None]), axis=1)  # padding: exp(-inf) = 0

    avail = (cols[None, :] < E) & (rows[:, None] >= 0)  # [BLOCK_T, BLOCK_E]: not padding, not chosen yet
    w_acc = tl.zeros([BLOCK_T, BLOCK_K], dtype=tl.float32)
    id_acc = tl.zeros([BLOCK_T, BLOCK_K], dtype=tl.int32)
    s_sel = tl.zeros([BLOCK_T], dtype=tl.float32)
    for r in range(top_k):
        cur = tl.where(avail, x, -float("inf"))
        best = tl.max(cur, axis=1)
        tie = avail & (cur == best[:, None])  # `avail &`: a chosen or padded column never ties
        idx = tl.max(tl.where(tie, cols[None, :], -1), axis=1)  # BUG: the contract breaks ties to the lower id
        w = tl.exp(best - m)
        s_sel += w
        slot = kcol[None, :] == r
        w_acc = tl.where(slot, w[:, None], w_acc)
        id_acc = tl.where(slot, idx[:, None], id_acc)
        avail = avail & (cols[None, :] != idx[:, None])
    if RENORM:
        inv = 1.0 / tl.where(row_ok, s_sel, 1.0)
    else:
        inv = 1.0 / tl.where(row_ok, s, 1.0)
    out = rows[:, None].to(tl.int64) * top_k + kcol[None, :]
    keep = row_ok[:, None] & (kcol[None, :] < top_k)
    tl.store(w_ptr + out, w_acc * inv[:, None], mask=keep)
    tl.store(ids_ptr + out, id_acc, mask=keep)


@register("moe_topk", "wrong_ties_high_id", backend="triton", expected_diagnosis="scattered", supports=_supports,
          dtypes=("float32",),
          idea="KNOWN WRONG: among equal logits picks the highest expert id; the contract wants the lowest.")
def wrong_ties_high_id(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    weights, ids = outputs(router_logits, top_k)
    t, e = router_logits.shape
    if t == 0:
        return weights, ids
    bt, be, bk = tiles(e, top_k)
    moe_topk_ties_high_kernel[(triton.cdiv(t, bt),)](router_logits, weights, ids, t, e, top_k,
                                                     RENORM=bool(renormalize), BLOCK_T=bt, BLOCK_E=be, BLOCK_K=bk,
                                                     num_warps=4)
    return weights, ids
