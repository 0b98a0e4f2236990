"""What the fp8 requantization exercise runs around the learner's gate/up kernel: routing, x's quantization, the
alignment and the solved down kernel (``v1_triton_block``'s). Only the gate/up kernel is the exercise's.
"""

from __future__ import annotations

from typing import Any

import torch
import triton

from kernels.moe_align.reference import torch_sort
from kernels.moe_fp8.reference import FP8, GROUP, groups
from kernels.moe_fp8.v1_triton_block import moe_fp8_down_kernel, quant_groups
from kernels.moe_topk.v2_triton_topk import triton_topk
from workbench import MODE, empty

BLOCK_M = 16  # tiny row blocks: the Triton interpreter costs ~1 ms per program, and tl.dot needs M >= 16
DOWN_BLOCK_N = 32


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
