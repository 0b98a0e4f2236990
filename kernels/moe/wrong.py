"""Known-wrong moe kernel: the fused down projection and combine with a plain store where the sum needs atomics.

``wrong_combine_store`` runs the kernels of the moe exercises (``ex_common``: routing and alignment in torch, the
solved gate/up + SiLU kernel of ``ex-silu``, the down kernel ``down_combine_kernel``) with ``store_rows`` as the
down kernel's epilogue: ``ex-combine``'s solution ``combine_rows`` with one line changed, a ``tl.store`` of each
slot's weighted row into its token's output row instead of a ``tl.atomic_add``. A token's top_k slots sit in
different experts' row blocks, so top_k programs write the same output row and the last one wins: the token gets
one expert's share instead of the weighted sum. On a GPU which program is last changes from run to run; the
interpreter runs programs in order, so here it is always the expert with the highest id. With top_k = 1 (the check
shape T=9, top_k=1) there is nothing to sum and the kernel passes.

What the checker says: ``race``. Under the checker the Triton interpreter records every program's stores, and
top_k programs of one launch store to the same output element without an atomic (a WAW hazard), which it reports
with both programs and the line. Without that check the values alone would say ``scattered``: every element of a
token's row is off by the missing experts' contributions, a different amount per element.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import down_and_combine, gate_up_silu, route_and_align
from workbench import register


@triton.jit
def store_rows(out_ptr, acc, weight_ptr, slots, valid, cols, top_k, d):
    """Combine one program's down-projection tile acc [BLOCK_M, BLOCK_N] (fp32) into out[T, d]."""
    rw = tl.load(weight_ptr + slots, mask=valid, other=0.0)
    tok = slots // top_k
    tl.store(out_ptr + tok[:, None] * d + cols[None, :], acc * rw[:, None],  # BUG: top_k programs write this row
             mask=valid[:, None] & (cols[None, :] < d))


@register("moe", "wrong_combine_store", backend="triton", expected_diagnosis="race", dtypes=("float32",),
          idea="KNOWN WRONG: the combine stores each slot's row instead of atomically adding the top_k of them.")
def wrong_combine_store(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
                        renormalize: bool = True) -> torch.Tensor:
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = gate_up_silu(x, w1, sorted_ids, expert_ids, n_padded, top_k)  # [T*k, I], one row per slot
    return down_and_combine(a, w2, weights, sorted_ids, expert_ids, n_padded, x.shape[0], top_k,
                            combine_rows=store_rows)
