import torch
import triton
import triton.language as tl

from kernels.attention.ex_common import flash_forward  # the kernel around your helper, and its launch


@triton.jit
def online_update(l_i, acc, p, v, m_i, m_new):
    """Return the running sum l_i [BLOCK_M] and accumulator acc [BLOCK_M, BLOCK_D] with one key tile added."""
    # p = exp(s - m_new) [BLOCK_M, BLOCK_N] are this tile's weights, v [BLOCK_N, BLOCK_D] its values; the row max
    # was m_i before this tile and is m_new now.
    # >>> learner
    #> # TODO: l_i and acc hold sums of exp(s - m_i) over the old tiles, but p is exp(s - m_new). Fix the update.
    #> l_i = l_i + tl.sum(p, axis=1)
    #> acc = acc + tl.dot(p.to(v.dtype), v, input_precision="ieee")
    alpha = tl.exp(m_i - m_new)  # rescale the old sums to the new max (exp(-inf) = 0 on the first tile)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
    # <<< learner
    return l_i, acc


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    return flash_forward(q, k, v, causal, scale, online_update=online_update)
