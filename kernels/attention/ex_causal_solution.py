import torch
import triton
import triton.language as tl

from kernels.attention.ex_common import flash_forward  # the kernel around your helpers, and its launch


@triton.jit
def key_tiles_end(pid_m, Sk, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """Return the end of query tile pid_m's loop over the keys: it visits the key tiles that start below it."""
    # >>> learner
    #> # TODO (causal, 1 of 2): with CAUSAL, key tiles past this query tile's diagonal are fully masked. Stop before.
    #> return Sk
    # Causal: query i sees keys j <= i (top-left aligned, also when Sq != Sk). Key tiles past this query tile's
    # diagonal are fully masked: stop before them. For Sq = Sk that skips (T - 1) T / 2 of the T^2 tile pairs.
    hi = tl.minimum((pid_m + 1) * BLOCK_M, Sk) if CAUSAL else Sk
    return hi
    # <<< learner


@triton.jit
def causal_mask(s, offs_m, offs_n, CAUSAL: tl.constexpr):
    """Return the scores s [BLOCK_M, BLOCK_N] (query rows offs_m, keys offs_n), -inf where a query must not look."""
    # >>> learner
    #> # TODO (causal, 2 of 2): with CAUSAL, query i must not see key j > i. Mask those scores.
    if CAUSAL:  # only the diagonal tile has masked pairs; masking every tile is simpler and costs no reads
        s = tl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))
    # <<< learner
    return s


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    return flash_forward(q, k, v, causal, scale, key_tiles_end=key_tiles_end, causal_mask=causal_mask)
