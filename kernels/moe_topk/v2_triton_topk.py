"""MoE routing in Triton: softmax over the experts and the top-k, fused, BLOCK_T tokens per program.

A program loads a [BLOCK_T, BLOCK_E] tile of logits (BLOCK_E = next_power_of_2(E), the padding masked to -inf),
converts to fp32, takes the row max and the exp-sum like ``tl.softmax`` does, then runs top_k rounds: the largest
logit still available in each row, and among equal logits the smallest column index (a min over the column
indices of the ties), which is the contract's lower-expert-id rule. The chosen column is struck from an
``available`` mask (not overwritten with -inf, so a genuine -inf logit stays selectable when top_k = E), and its
weight exp(x - m) is dropped into column r of a [BLOCK_T, BLOCK_K] register tile. One store of the normalised
tile at the end: divided by the chosen weights' sum (renormalize) or by the full exp-sum (raw probabilities).

Selecting on the logits rather than on the probabilities keeps two distinct logits distinct: exp() in fp32 can
round neighbours to one value, the inputs cannot collide. Tile sizes: BLOCK_T * BLOCK_E ~ 2048 elements per
program (4 warps: 16 fp32 logits per thread), so E = 256 routes 8 tokens per program and E = 8 routes 64 (capped).
ptxas (sm_90, bf16 logits, E = 256, top_k = 8): 96 registers, no spills.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels.moe_topk.reference import outputs
from workbench import MODE, register

MAX_E = 4096  # one row of logits per program at most: 4096 fp32 = 32 registers per thread at 4 warps
# Logits per program. The interpreter's cost is per tl op (~3 ms per tl.max/tl.min call, two per round), not per
# element, so cpu mode takes 4x bigger tiles: fewer programs, the same code path.
GPU_TILE = 2048
TILE = GPU_TILE if MODE == "gpu" else 8192
MAX_ROWS = 64  # tokens per program at most (E <= 32 at the GPU tile)


@triton.jit
def moe_topk_kernel(x_ptr, w_ptr, ids_ptr, T, E, top_k, RENORM: tl.constexpr, BLOCK_T: tl.constexpr,
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
        idx = tl.min(tl.where(tie, cols[None, :], BLOCK_E), axis=1)  # lowest column among the maxima
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


def tiles(e: int, top_k: int, tile: int | None = None) -> tuple[int, int, int]:
    """Return (BLOCK_T, BLOCK_E, BLOCK_K) for ``e`` experts and ``top_k``: ~``tile`` logits per program (default:
    this mode's TILE)."""
    block_e = triton.next_power_of_2(e)
    return max(1, min(MAX_ROWS, (tile or TILE) // block_e)), block_e, triton.next_power_of_2(top_k)


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return f"moe_topk/triton_topk keeps a row of logits in one program's registers: E <= {MAX_E}, " \
               f"got E={shape['E']}"
    return None


def _spec(e: int = 256, top_k: int = 8, dtype: str = "bf16") -> dict:
    """Return the wb.inspect spec for ``e`` experts, ``top_k`` and logits of ``dtype`` (default DeepSeek-V3-like)."""
    bt, be, bk = tiles(e, top_k, GPU_TILE)
    return triton_spec(moe_topk_kernel, dtype, types={"w_ptr": torch.float32, "ids_ptr": torch.int32}, RENORM=True,
                       BLOCK_T=bt, BLOCK_E=be, BLOCK_K=bk, num_warps=4, num_stages=1)


@register("moe_topk", "triton_topk", backend="triton", supports=_supports, inspect_spec=_spec,
          idea="Triton: a tile of tokens per program, fp32 softmax, top_k rounds of row max + lowest tied column.")
def triton_topk(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
                ) -> tuple[torch.Tensor, torch.Tensor]:
    weights, ids = outputs(router_logits, top_k)
    t, e = router_logits.shape
    if t == 0:
        return weights, ids
    bt, be, bk = tiles(e, top_k)
    moe_topk_kernel[(triton.cdiv(t, bt),)](router_logits, weights, ids, t, e, top_k, RENORM=bool(renormalize),
                                           BLOCK_T=bt, BLOCK_E=be, BLOCK_K=bk, num_warps=4)
    return weights, ids
