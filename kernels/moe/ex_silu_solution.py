import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import down_and_combine, gate_up_silu, route_and_align  # the kernels around your helper


@triton.jit
def silu_and_mul(gate, up):
    """Return the gate/up GEMM's fused epilogue from its two fp32 tiles gate and up [BLOCK_M, BLOCK_N]."""
    # >>> learner
    #> # TODO: the fused epilogue. Both fp32 tiles are in registers: combine them into SiLU(gate) * up
    #> #       (SiLU(g) = g * sigmoid(g)), so the [T*k, 2I] gate/up result never goes to HBM.
    #> return gate
    # The fused epilogue: SiLU(gate) * up while both tiles are still in registers, so [T*k, 2I] never goes to HBM.
    act = gate * tl.sigmoid(gate) * up
    return act
    # <<< learner


def moe(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
        renormalize: bool = True) -> torch.Tensor:
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = gate_up_silu(x, w1, sorted_ids, expert_ids, n_padded, top_k, silu_and_mul=silu_and_mul)  # [T*k, I]
    return down_and_combine(a, w2, weights, sorted_ids, expert_ids, n_padded, x.shape[0], top_k)
