import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import BLOCK, gate_up_silu, route_and_align


@triton.jit
def down_combine_kernel(a_ptr, w2_ptr, out_ptr, weight_ptr, sorted_ptr, expert_ptr, npad_ptr, n_slots, top_k, d,
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
    # The fused epilogue: scale each row by its router weight and add it into its token's output row. A token's
    # top_k slots sit in different experts' blocks (different programs), so the sum needs atomics.
    # >>> learner
    #> # TODO: load each row's router weight (weight_ptr holds one per slot), find each row's token, and add the
    #> #       weighted rows into out[token, cols]. Several programs add into the same token row.
    rw = tl.load(weight_ptr + slots, mask=valid, other=0.0)
    # <<< learner
    tok = slots // top_k
    # >>> learner
    #> tl.store(out_ptr + tok[:, None] * d + cols[None, :], acc, mask=valid[:, None] & (cols[None, :] < d))
    tl.atomic_add(out_ptr + tok[:, None] * d + cols[None, :], acc * rw[:, None],
                  mask=valid[:, None] & (cols[None, :] < d))
    # <<< learner


def moe(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
        renormalize: bool = True) -> torch.Tensor:
    t, d = x.shape
    inter = w1.shape[1] // 2
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = gate_up_silu(x, w1, sorted_ids, expert_ids, n_padded, top_k)  # [T*k, I], one row per slot
    out = torch.zeros((t, d), dtype=torch.float32, device=x.device)  # atomics accumulate in fp32
    grid = (expert_ids.numel(), triton.cdiv(d, BLOCK))
    down_combine_kernel[grid](a, w2, out, weights, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                              PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                              BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return out.to(x.dtype)
