"""Known-wrong attention_bwd kernel: the dK/dV step of a FlashAttention backward without the softmax's Delta term.

``wrong_no_delta`` runs the attention-bwd-dkdv exercise's kernels (``ex_common.py``'s ``flash_backward``: its
``dq_kernel``, and its ``dkdv_kernel`` calling the step below) with one line of the solution's ``dkdv_step``
changed:
``dS = P * dP`` where the softmax backward is ``dS = P * (dP - Delta)``, ``Delta_i = rowsum(dO_i * O_i)``. The
Jacobian of a softmax row is ``diag(p) - p p^T``: dropping Delta drops the ``- p p^T`` part, the term that keeps
every row of dS summing to zero (probabilities sum to 1, so their gradient has no component along the all-ones
direction). dV (= P^T dO) does not use dS and stays right; so does dQ, which the given kernel computes.

In cpu mode it takes Sq * Sk <= 64 * 64, the sizes the exercise's 16x16-tile kernels are meant for under the
Triton interpreter (its 100 x 100 check shapes alone would take longer than the rest of the check).

What the checker says, honestly: ``scattered``. dk is wrong at almost every element, each by its own amount (the
missing ``P * Delta`` term, weighted by q), with no tail, tile or constant-factor pattern.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.attention_bwd.ex_common import flash_backward
from workbench import register
from workbench.registry import CpuLimit


@triton.jit
def dkdv_step_no_delta(dk, dv, q, do, v, s, lse, delta, scale):
    """Return dK and dV [BLOCK_N, BLOCK_D] plus this query tile's share (s: [BLOCK_M, BLOCK_N], -inf if masked)."""
    p = tl.exp(s - lse[:, None])  # P = exp(S - lse): the forward's probabilities, 0 where masked
    dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision="ieee")  # dV += P^T dO  [BLOCK_N, D]
    dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dP = dO V^T  [BLOCK_M, BLOCK_N]
    ds = p * dp  # BUG: the softmax backward is dS = P * (dP - Delta)
    dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee") * scale  # dK += scale * dS^T Q
    return dk, dv


@register("attention_bwd", "wrong_no_delta", backend="triton", expected_diagnosis="scattered", dtypes=("float32",),
          cpu_limit=CpuLimit("Sq*Sk", 64 * 64, "the exercise's 16x16-tile kernels under the Triton interpreter"),
          idea="KNOWN WRONG: dS = P * dP in the dK/dV step: the softmax backward's - Delta term is missing.")
def wrong_no_delta(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                   do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    return flash_backward(dkdv_step_no_delta, q, k, v, o, lse, do, causal, scale)
