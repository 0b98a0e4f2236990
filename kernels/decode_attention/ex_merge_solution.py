import torch
import triton
import triton.language as tl

from kernels.decode_attention.ex_common import lse_fold  # the kernel around your helper, and its launch


@triton.jit
def fold_split(m, l_i, acc, ls, o):
    """Return the running merge (m, l_i, acc) with one split folded in: its log-sum-exp ls and its partial output
    o [DP] (normalised over the split's own keys; junk when the split is empty, ls = -inf).

    The state: m = the largest lse so far, l_i = sum of exp(lse_s - m), acc = sum of exp(lse_s - m) * o_s.
    """
    # >>> learner
    #> # TODO: weight the split by exp(ls - m_new) and bring the old sums to the new max m_new first. An empty
    #> #       split (ls = -inf) must add nothing: its o is junk (NaN under the checker), and 0 * NaN is NaN.
    #> return tl.maximum(m, ls), l_i + 1.0, acc + o  # so far: every split weighted alike, empty ones too
    live = ls > float("-inf")  # an empty split: no keys, lse = -inf
    m_new = tl.maximum(m, ls)
    m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)  # no live split yet: keep both exponents finite
    alpha = tl.exp(m - m_ref)  # brings the old sums from max m to max m_new (<= 1; 0 on the first live split)
    w = tl.where(live, tl.exp(ls - m_ref), 0.0)  # this split's share, relative to m_new
    acc = acc * alpha + tl.where(live, w * o, 0.0)  # skip an empty split's o instead of weighting it by 0
    return m_new, l_i * alpha + w, acc
    # <<< learner


def lse_merge(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    return lse_fold(fold_split, o, lse)
