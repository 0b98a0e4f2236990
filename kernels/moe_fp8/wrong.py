"""Known-wrong moe_fp8 variants: a recipe step left out, and a block-scale index that real shapes never expose.

``wrong_bf16_intermediate`` feeds the down projection the SwiGLU output as computed (float32, then bf16 as a
kernel would store it) instead of requantizing it to e4m3 in 1x128 groups. It is the more accurate layer, and
that is the point: the contract is the recipe a deployed fp8 model runs (DeepSeek-V3's inference kernels
requantize there), so a kernel that skips the step returns different numbers from the checkpoint's own. The
difference is e4m3's rounding of every intermediate element (up to 1/16 relative), ~3% of |out| per element and
4-5x the tolerance at its worst. What the checker says: ``precision``: no tail or tile pattern, every element a
little off (the middle one by over a fifth of its tolerance) and none far off.

``wrong_up_scale_row`` is an indexing bug in the block scales: the up projection's rows are I + n of w1, so their
128x128 block row is (I + n) // 128, and the kernel takes I // 128 + pid_n, which is the same thing only when I
is a multiple of 128. Every real model's I is (14336, 2048, 768), so the bug would pass any test at real shapes;
the check shape with I = 136 puts the up rows 136..271 across blocks 1 and 2 and catches it. What the checker
says, honestly: ``precision``. Only 8 of the 136 intermediate columns (120..127, rows 256..263 of w1, in block 2)
get the wrong scale, and the down GEMM sums them into every output element: a pattern of small errors spread
everywhere, not of wrong indices. The diagnosis names the pattern, not the cause; that only I = 136 fails is the
clue. Its kernel is the exercise's gate/up kernel (``ex_common.gate_up_requant_kernel``, with the solved
``requant_rows`` of ``ex_requant_solution.py``) with that one line changed, run by the exercise's pipeline
(``ex_common.run_with_gate_up``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe_fp8.ex_common import run_with_gate_up
from kernels.moe_fp8.ex_requant_solution import requant_rows  # noqa: F401  (the epilogue the kernel calls)
from kernels.moe_fp8.reference import _experts
from workbench import register


@register("moe_fp8", "wrong_bf16_intermediate", backend="torch", expected_diagnosis="precision",
          idea="KNOWN WRONG: skips the 1x128 e4m3 requantization of silu(gate) * up before the down projection.")
def wrong_bf16_intermediate(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor,
                            w2q: torch.Tensor, w2s: torch.Tensor, top_k: int, renormalize: bool = True
                            ) -> torch.Tensor:
    return _experts(x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize, torch.float32,
                    requant=False).to(x.dtype)


@triton.jit
def gate_up_up_scale_bug_kernel(xq_ptr, xs_ptr, w1q_ptr, w1s_ptr, aq_ptr, as_ptr, sorted_ptr, expert_ptr, npad_ptr,
                                n_slots, top_k, d, inter, BLOCK_M: tl.constexpr, GROUP: tl.constexpr,
                                DOT_F16: tl.constexpr):
    pid_m = tl.program_id(0)  # a block of BLOCK_M padded rows, all of one expert
    pid_n = tl.program_id(1)  # 128 columns of the intermediate: exactly one quantization group per row
    if pid_m * BLOCK_M >= tl.load(npad_ptr):
        return
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots  # padding rows hold the sentinel n_slots
    tok = (slots // top_k).to(tl.int64)
    cols = pid_n * GROUP + tl.arange(0, GROUP)
    ks = tl.arange(0, GROUP)
    gd = (d + GROUP - 1) // GROUP  # scale groups along d
    g2i = (2 * inter + GROUP - 1) // GROUP
    gate = tl.zeros((BLOCK_M, GROUP), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, GROUP), dtype=tl.float32)
    for kg in range(0, gd):  # one K step = one 128-channel group of x = one 128x128 block of w1
        k = kg * GROUP + ks
        a = tl.load(xq_ptr + tok[:, None] * d + k[None, :], mask=valid[:, None] & (k[None, :] < d), other=0.0)
        wmask = (k[:, None] < d) & (cols[None, :] < inter)
        wg = tl.load(w1q_ptr + e * 2 * inter * d + cols[None, :] * d + k[:, None], mask=wmask, other=0.0)
        wu = tl.load(w1q_ptr + e * 2 * inter * d + (inter + cols[None, :]) * d + k[:, None], mask=wmask, other=0.0)
        sa = tl.load(xs_ptr + tok * gd + kg, mask=valid, other=0.0)  # x's scale: one per row and group
        sg = tl.load(w1s_ptr + e * g2i * gd + (cols // GROUP) * gd + kg, mask=cols < inter, other=0.0)
        # BUG: the up rows are I + cols, and the scale block is (I + cols) // 128; I // 128 + pid_n assumes
        # I % 128 == 0, true for every real model (I = 14336, 2048, 768) and wrong for I = 136.
        su_row = inter // GROUP + pid_n + 0 * cols  # (one row for the whole tile, kept a [128] block)
        su = tl.load(w1s_ptr + e * g2i * gd + su_row * gd + kg, mask=cols < inter, other=0.0)
        if DOT_F16:
            a, wg, wu = a.to(tl.float16), wg.to(tl.float16), wu.to(tl.float16)
        gate += tl.dot(a, wg) * (sa[:, None] * sg[None, :])
        up += tl.dot(a, wu) * (sa[:, None] * su[None, :])
    h = gate / (1.0 + tl.exp(-gate)) * up  # SiLU(gate) * up in fp32: [BLOCK_M, 128], one group per row
    q, scale = requant_rows(h)  # the epilogue's requantization (the exercise's solved helper)
    slots64 = slots.to(tl.int64)
    tl.store(aq_ptr + slots64[:, None] * inter + cols[None, :], q.to(aq_ptr.dtype.element_ty),
             mask=valid[:, None] & (cols[None, :] < inter))
    tl.store(as_ptr + slots64 * ((inter + GROUP - 1) // GROUP) + pid_n, scale, mask=valid)


@register("moe_fp8", "wrong_up_scale_row", backend="triton", expected_diagnosis="precision", bf16_dot=False,
          idea="KNOWN WRONG: takes the up rows' scale block as I // 128 + pid_n: right only when I % 128 == 0.")
def wrong_up_scale_row(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor,
                       w2q: torch.Tensor, w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> torch.Tensor:
    return run_with_gate_up(gate_up_up_scale_bug_kernel, x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize)
