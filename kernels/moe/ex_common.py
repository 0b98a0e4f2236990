"""What the two Triton moe exercises share: routing and alignment in torch, and each exercise's solved kernel.

``ex-silu`` fills in the gate/up kernel and borrows the solved down-and-combine launch from here; ``ex-combine``
fills in the down kernel and borrows the solved gate/up launch. Both solved kernels live in their solution files;
this module only wraps them, so each kernel is written exactly once.
"""

from __future__ import annotations

import torch
import triton

from kernels.moe.reference import route
from kernels.moe_align.reference import torch_sort

BLOCK = 16  # tiny tiles: the Triton interpreter costs ~1 ms per program, and tl.dot needs dims >= 16


def route_and_align(router_logits: torch.Tensor, top_k: int, renormalize: bool
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (flat router weights [T*k] fp32, sorted_ids, expert_ids, n_padded) for blocks of BLOCK rows."""
    w, ids = route(router_logits, top_k, renormalize)
    sorted_ids, expert_ids, n_padded = torch_sort.fn(ids.to(torch.int32), router_logits.shape[1], BLOCK)
    return w.float().reshape(-1).contiguous(), sorted_ids, expert_ids, n_padded


def gate_up_silu(x: torch.Tensor, w1: torch.Tensor, sorted_ids: torch.Tensor, expert_ids: torch.Tensor,
                 n_padded: torch.Tensor, top_k: int) -> torch.Tensor:
    """Return a[T*k, I] = SiLU(x w_gate^T) * (x w_up^T) per slot, with the solved kernel of ex-silu."""
    from kernels.moe.ex_silu_solution import gate_up_kernel

    t, d = x.shape
    inter = w1.shape[1] // 2
    a = torch.empty((t * top_k, inter), dtype=x.dtype, device=x.device)
    grid = (expert_ids.numel(), triton.cdiv(inter, BLOCK))
    gate_up_kernel[grid](x, w1, a, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                         PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                         BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return a


def down_and_combine(a: torch.Tensor, w2: torch.Tensor, weights: torch.Tensor, sorted_ids: torch.Tensor,
                     expert_ids: torch.Tensor, n_padded: torch.Tensor, t: int, top_k: int) -> torch.Tensor:
    """Return out[T, d] = sum over each token's slots of weight * (a w2[e]^T), with the solved kernel of ex-combine."""
    from kernels.moe.ex_combine_solution import down_combine_kernel

    d, inter = w2.shape[1], w2.shape[2]
    out = torch.zeros((t, d), dtype=torch.float32, device=a.device)
    grid = (expert_ids.numel(), triton.cdiv(d, BLOCK))
    down_combine_kernel[grid](a, w2, out, weights, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                              PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
                              BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return out.to(a.dtype)
