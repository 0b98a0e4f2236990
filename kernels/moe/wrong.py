"""Known-wrong moe kernel: the fused down projection and combine with a plain store where the sum needs atomics.

``wrong_combine_store`` runs the two Triton kernels of the moe exercises (``ex_common``: routing and alignment in
torch, the solved gate/up + SiLU kernel of ``ex-silu``) and the down-and-combine kernel of ``ex-combine``'s
solution with one line changed: the epilogue ``tl.store``s each slot's weighted row into its token's output row
instead of ``tl.atomic_add``ing it. A token's top_k slots sit in different experts' row blocks, so top_k programs
write the same output row and the last one wins: the token gets one expert's share instead of the weighted sum.
On a GPU which program is last changes from run to run; the interpreter runs programs in order, so here it is
always the expert with the highest id. With top_k = 1 (the check shape T=9, top_k=1) there is nothing to sum and
the kernel passes.

What the checker says: ``race``. Under the checker the Triton interpreter records every program's stores, and
top_k programs of one launch store to the same output element without an atomic (a WAW hazard), which it reports
with both programs and the line. Without that check the values alone would say ``scattered``: every element of a
token's row is off by the missing experts' contributions, a different amount per element.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import BLOCK, gate_up_silu, route_and_align
from workbench import register


@triton.jit
def down_store_kernel(a_ptr, w2_ptr, out_ptr, weight_ptr, sorted_ptr, expert_ptr, npad_ptr, n_slots, top_k, d,
                      inter, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)  # a block of BLOCK_M padded rows, all of one expert
    pid_n = tl.program_id(1)  # a tile of BLOCK_N output columns of d
    if pid_m * BLOCK_M >= tl.load(npad_ptr):
        return
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + slots[:, None] * inter + ks[None, :], mask=valid[:, None] & (ks[None, :] < inter),
                    other=0.0)
        w = tl.load(w2_ptr + e * d * inter + cols[None, :] * inter + ks[:, None],
                    mask=(ks[:, None] < inter) & (cols[None, :] < d), other=0.0)  # w2[e].T tile: [BLOCK_K, BLOCK_N]
        acc = tl.dot(a, w, acc, input_precision=PRECISION)
    # The fused epilogue: scale each row by its router weight and write it into its token's output row.
    rw = tl.load(weight_ptr + slots, mask=valid, other=0.0)
    tok = slots // top_k
    tl.store(out_ptr + tok[:, None] * d + cols[None, :], acc * rw[:, None],  # BUG: top_k programs write this row
             mask=valid[:, None] & (cols[None, :] < d))


@register("moe", "wrong_combine_store", backend="triton", expected_diagnosis="race", dtypes=("float32",),
          idea="KNOWN WRONG: the combine stores each slot's row instead of atomically adding the top_k of them.")
def wrong_combine_store(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
                        renormalize: bool = True) -> torch.Tensor:
    t, d = x.shape
    inter = w1.shape[1] // 2
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = gate_up_silu(x, w1, sorted_ids, expert_ids, n_padded, top_k)  # [T*k, I], one row per slot
    out = torch.zeros((t, d), dtype=torch.float32, device=x.device)
    grid = (expert_ids.numel(), triton.cdiv(d, BLOCK))
    down_store_kernel[grid](a, w2, out, weights, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                            PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                            BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return out.to(x.dtype)
