import torch
import triton
import triton.language as tl

from kernels.moe.ex_common import down_and_combine, gate_up_silu, route_and_align  # the kernels around your helper


@triton.jit
def combine_rows(out_ptr, acc, weight_ptr, slots, valid, cols, top_k, d):
    """Combine one program's down-projection tile acc [BLOCK_M, BLOCK_N] (fp32) into out[T, d].

    Row i of acc is slot slots[i] (token slots[i] // top_k), columns cols; rows with valid[i] False are padding.
    """
    # >>> learner
    #> # TODO: load each row's router weight (weight_ptr holds one per slot), scale the rows, and add them into
    #> #       out[token, cols]. Several programs add into the same token row.
    #> tok = slots // top_k
    #> tl.store(out_ptr + tok[:, None] * d + cols[None, :], acc, mask=valid[:, None] & (cols[None, :] < d))
    rw = tl.load(weight_ptr + slots, mask=valid, other=0.0)
    tok = slots // top_k
    tl.atomic_add(out_ptr + tok[:, None] * d + cols[None, :], acc * rw[:, None],
                  mask=valid[:, None] & (cols[None, :] < d))
    # <<< learner


def moe(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
        renormalize: bool = True) -> torch.Tensor:
    weights, sorted_ids, expert_ids, n_padded = route_and_align(router_logits, top_k, renormalize)
    a = gate_up_silu(x, w1, sorted_ids, expert_ids, n_padded, top_k)  # [T*k, I], one row per slot
    return down_and_combine(a, w2, weights, sorted_ids, expert_ids, n_padded, x.shape[0], top_k,
                            combine_rows=combine_rows)
