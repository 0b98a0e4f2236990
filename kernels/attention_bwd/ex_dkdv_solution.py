import torch
import triton
import triton.language as tl

from kernels.attention_bwd.ex_common import flash_backward  # dq_kernel, dkdv_kernel (which calls your step), launch


@triton.jit
def dkdv_step(dk, dv, q, do, v, s, lse, delta, scale):
    """Return dK and dV [BLOCK_N, BLOCK_D] plus this query tile's share (s: [BLOCK_M, BLOCK_N], -inf if masked)."""
    # >>> learner
    #> # TODO: rebuild P from s and lse, then add this query tile's share to dV and dK (dP and dS on the way).
    p = tl.exp(s - lse[:, None])  # P = exp(S - lse): the forward's probabilities, 0 where masked
    dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision="ieee")  # dV += P^T dO  [BLOCK_N, D]
    dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dP = dO V^T  [BLOCK_M, BLOCK_N]
    ds = p * (dp - delta[:, None])  # dS = P * (dP - Delta)
    dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee") * scale  # dK += scale * dS^T Q
    # <<< learner
    return dk, dv


def attention_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                  do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    return flash_backward(dkdv_step, q, k, v, o, lse, do, causal, scale)
