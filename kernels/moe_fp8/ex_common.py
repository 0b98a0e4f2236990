"""What the fp8 requantization exercise runs around the learner's helper: routing, x's quantization, the alignment,
the gate/up kernel and the solved down kernel (``v1_triton_block``'s).

``moe-fp8-requant`` writes ``requant_rows(h) -> (q, scale)``, the requantization that ``gate_up_requant_kernel``
(here) calls in its epilogue; :func:`requant_moe` binds it and runs the layer. The known-wrong
``wrong_up_scale_row`` (wrong.py) is this gate/up kernel with one scale index changed.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._triton_hooks import with_helpers
from kernels.moe_align.reference import torch_sort
from kernels.moe_fp8.reference import FP8, GROUP, groups
from kernels.moe_fp8.v1_triton_block import moe_fp8_down_kernel, quant_groups
from kernels.moe_topk.v2_triton_topk import triton_topk
from workbench import MODE, empty

BLOCK_M = 16  # tiny row blocks: the Triton interpreter costs ~1 ms per program, and tl.dot needs M >= 16
DOWN_BLOCK_N = 32

requant_rows = None  # the epilogue's requantization gate_up_requant_kernel calls: bound per launch by requant_moe


@triton.jit
def gate_up_requant_kernel(xq_ptr, xs_ptr, w1q_ptr, w1s_ptr, aq_ptr, as_ptr, sorted_ptr, expert_ptr, npad_ptr,
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
        su = tl.load(w1s_ptr + e * g2i * gd + ((inter + cols) // GROUP) * gd + kg, mask=cols < inter, other=0.0)
        if DOT_F16:
            a, wg, wu = a.to(tl.float16), wg.to(tl.float16), wu.to(tl.float16)
        gate += tl.dot(a, wg) * (sa[:, None] * sg[None, :])
        up += tl.dot(a, wu) * (sa[:, None] * su[None, :])
    h = gate / (1.0 + tl.exp(-gate)) * up  # SiLU(gate) * up in fp32: [BLOCK_M, 128], one group per row
    q, scale = requant_rows(h)  # the epilogue's requantization: the exercise's helper
    slots64 = slots.to(tl.int64)
    tl.store(aq_ptr + slots64[:, None] * inter + cols[None, :], q.to(aq_ptr.dtype.element_ty),
             mask=valid[:, None] & (cols[None, :] < inter))
    tl.store(as_ptr + slots64 * ((inter + GROUP - 1) // GROUP) + pid_n, scale, mask=valid)


def requant_moe(requant_rows: Any, x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor,
                w1s: torch.Tensor, w2q: torch.Tensor, w2s: torch.Tensor, top_k: int,
                renormalize: bool = True) -> torch.Tensor:
    """Run moe_fp8 with gate_up_requant_kernel requantizing its SiLU(gate) * up tile by ``requant_rows``."""
    kernel = with_helpers(gate_up_requant_kernel, "requant_moe", requant_rows=requant_rows)
    return run_with_gate_up(kernel, x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize)


def run_with_gate_up(gate_up_kernel: Any, x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor,
                     w1s: torch.Tensor, w2q: torch.Tensor, w2s: torch.Tensor, top_k: int,
                     renormalize: bool = True) -> torch.Tensor:
    """Run moe_fp8 with ``gate_up_kernel`` (the exercise's signature) as the gate/up launch; return out[T,d]."""
    t, d = x.shape
    e, two_i, _ = w1q.shape
    inter = two_i // 2
    weights, ids = triton_topk.fn(router_logits, top_k, renormalize)
    xq, xs = quant_groups(x)
    sorted_ids, expert_ids, n_padded = torch_sort.fn(ids.to(torch.int32).contiguous(), e, BLOCK_M)
    n_slots, n_blocks = t * top_k, expert_ids.numel()
    aq = empty((n_slots, inter), FP8, x.device)  # poisoned under the checker: a row never stored shows up
    a_s = empty((n_slots, groups(inter)), torch.float32, x.device)
    emulate = MODE != "gpu"  # the interpreter has no fp8 dot: upcast the tiles to fp16 (exact for e4m3)
    gate_up_kernel[(n_blocks, groups(inter))](xq, xs, w1q, w1s, aq, a_s, sorted_ids, expert_ids, n_padded, n_slots,
                                              top_k, d, inter, BLOCK_M=BLOCK_M, GROUP=GROUP, DOT_F16=emulate)
    out = torch.zeros((t, d), dtype=torch.float32, device=x.device)
    moe_fp8_down_kernel[(n_blocks * triton.cdiv(d, DOWN_BLOCK_N),)](
        aq, a_s, w2q, w2s, out, weights.float().contiguous(), sorted_ids, expert_ids, n_padded, n_slots, d, inter,
        n_blocks, TOP_K=top_k, BLOCK_M=BLOCK_M, BLOCK_N=DOWN_BLOCK_N, GROUP=GROUP, GROUP_M=8, DOT_F16=emulate)
    return out.to(x.dtype)
