import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import BLOCK, down_and_combine, route_and_align


@triton.jit
def gate_up_kernel(x_ptr, w1_ptr, a_ptr, sorted_ptr, expert_ptr, npad_ptr, n_slots, top_k, d, inter,
                   PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)  # a block of BLOCK_M padded rows, all of one expert
    pid_n = tl.program_id(1)  # a tile of BLOCK_N columns of the intermediate I
    if pid_m * BLOCK_M >= tl.load(npad_ptr):
        return  # a block past the used rows (the grid is sized for the worst case)
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots  # padding rows hold the sentinel n_slots = T * top_k
    tok = slots // top_k  # gather straight from x: no permuted copy of the activations
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    w_gate = w1_ptr + e * 2 * inter * d + cols[None, :] * d  # rows 0..I-1 of w1[e]
    w_up = w_gate + inter * d  # rows I..2I-1
    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, d, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + tok[:, None] * d + ks[None, :], mask=valid[:, None] & (ks[None, :] < d), other=0.0)
        wmask = (ks[:, None] < d) & (cols[None, :] < inter)
        gate = tl.dot(a, tl.load(w_gate + ks[:, None], mask=wmask, other=0.0), gate, input_precision=PRECISION)
        up = tl.dot(a, tl.load(w_up + ks[:, None], mask=wmask, other=0.0), up, input_precision=PRECISION)
    # >>> learner
    #> # TODO: the fused epilogue. Both fp32 tiles are in registers: combine them into SiLU(gate) * up
    #> #       (SiLU(g) = g * sigmoid(g)), so the [T*k, 2I] gate/up result never goes to HBM.
    #> act = gate
    # The fused epilogue: SiLU(gate) * up while both tiles are still in registers, so [T*k, 2I] never goes to HBM.
    act = gate * tl.sigmoid(gate) * up
    # <<< learner
    tl.store(a_ptr + slots[:, None] * inter + cols[None, :], act.to(a_ptr.dtype.element_ty),
             mask=valid[:, None] & (cols[None, :] < inter))


def moe(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
        renormalize: bool = True) -> torch.Tensor:
    t, d = x.shape
    inter = w1.shape[1] // 2
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = torch.empty((t * top_k, inter), dtype=x.dtype, device=x.device)  # one row per (token, choice) slot
    grid = (expert_ids.numel(), triton.cdiv(inter, BLOCK))
    gate_up_kernel[grid](x, w1, a, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                         PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                         BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return down_and_combine(a, w2, weights, sorted_ids, expert_ids, n_padded, t, top_k)
