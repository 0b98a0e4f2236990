import torch
import triton
import triton.language as tl

from kernels.moe_fp8.ex_common import requant_moe  # the layer around your helper
from kernels.moe_fp8.v1_triton_block import e4m3_rne  # noqa: F401  (rounds fp32 onto the e4m3 grid; the requant needs it)


@triton.jit
def requant_rows(h):
    """Return (q, scale): h [BLOCK_M, 128] (fp32, one 128-column group per row) requantized to e4m3 values.

    q holds the e4m3-rounded values h / scale (still fp32: the kernel casts them when it stores), scale [BLOCK_M]
    each row's scale.
    """
    # >>> learner
    #> # TODO: requantize h for the down projection, one scale per row of this 128-column group:
    #> #       scale = max(amax of the row, 1e-12) / 448, q = e4m3_rne(h / scale); divide with tl.math.div_rn
    #> #       (IEEE, as the contract does). The kernel stores q into aq and each row's scale into as[slot, pid_n].
    #> #       The placeholder returns h with scale 1: e4m3's grid then rounds every value its own way.
    #> q = h
    #> scale = tl.full((h.shape[0],), 1.0, tl.float32)
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(h), axis=1), 1e-12), 448.0)
    q = e4m3_rne(tl.math.div_rn(h, scale[:, None]))
    # <<< learner
    return q, scale


def moe_fp8(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor, w2q: torch.Tensor,
            w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> torch.Tensor:
    return requant_moe(requant_rows, x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize)
