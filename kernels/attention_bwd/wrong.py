"""Known-wrong attention_bwd kernel: the dK/dV step of a FlashAttention backward without the softmax's Delta term.

``wrong_no_delta`` runs the attention-bwd-dkdv exercise's kernels (``ex_common.py``'s ``dq_kernel`` and
``masked_scores``, and its ``dkdv_kernel`` copied here so that it calls the step below) with one line of the
solution's ``dkdv_step`` changed:
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

import math

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels.attention_bwd.ex_common import BLOCK_M, BLOCK_N, dq_kernel, masked_scores
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


@triton.jit
def dkdv_no_delta_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, Sq, Sk, D, scale,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per (key tile, batch*head) owns dK and dV of its keys and loops over the query tiles.
    pid_n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_ptr += bh * Sq * D
    do_ptr += bh * Sq * D
    k_ptr += bh * Sk * D
    v_ptr += bh * Sk * D
    dk_ptr += bh * Sk * D
    dv_ptr += bh * Sk * D
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_ok = (offs_n[:, None] < Sk) & (offs_d[None, :] < D)
    k = tl.load(k_ptr + offs_n[:, None] * D + offs_d[None, :], mask=kv_ok, other=0.0)  # read once, used Sq times
    v = tl.load(v_ptr + offs_n[:, None] * D + offs_d[None, :], mask=kv_ok, other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    lo = pid_n * BLOCK_N if CAUSAL else 0  # query tiles above the diagonal see none of these keys
    for start_m in range(lo, Sq, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q_ok = (offs_m[:, None] < Sq) & (offs_d[None, :] < D)
        q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
        do = tl.load(do_ptr + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
        lse = tl.load(lse_ptr + bh * Sq + offs_m, mask=offs_m < Sq, other=0.0)
        delta = tl.load(delta_ptr + bh * Sq + offs_m, mask=offs_m < Sq, other=0.0)
        s = masked_scores(q, k, offs_m, offs_n, Sq, Sk, scale, CAUSAL)  # [BLOCK_M, BLOCK_N], -inf where masked
        dk, dv = dkdv_step_no_delta(dk, dv, q, do, v, s, lse, delta, scale)
    tl.store(dk_ptr + offs_n[:, None] * D + offs_d[None, :], dk.to(dk_ptr.dtype.element_ty), mask=kv_ok)
    tl.store(dv_ptr + offs_n[:, None] * D + offs_d[None, :], dv.to(dv_ptr.dtype.element_ty), mask=kv_ok)


@register("attention_bwd", "wrong_no_delta", backend="triton", expected_diagnosis="scattered", dtypes=("float32",),
          cpu_limit=CpuLimit("Sq*Sk", 64 * 64, "the exercise's 16x16-tile kernels under the Triton interpreter"),
          idea="KNOWN WRONG: dS = P * dP in the dK/dV step: the softmax backward's - Delta term is missing.")
def wrong_no_delta(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                   do: torch.Tensor, causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    b, h, sq, d = q.shape
    sk = k.shape[2]
    q, k, v, do, lse = q.contiguous(), k.contiguous(), v.contiguous(), do.contiguous(), lse.contiguous()
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    delta = (do.float() * o.float()).sum(-1).contiguous()
    dq, dk, dv = wb.empty_like(q), wb.empty_like(k), wb.empty_like(v)
    block_d = max(16, triton.next_power_of_2(d))
    args = (sq, sk, d, scale)
    meta = {"CAUSAL": causal, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_D": block_d}
    dq_kernel[(triton.cdiv(sq, BLOCK_M), b * h)](q, k, v, do, lse, delta, dq, *args, **meta)
    dkdv_no_delta_kernel[(triton.cdiv(sk, BLOCK_N), b * h)](q, k, v, do, lse, delta, dk, dv, *args, **meta)
    return dq, dk, dv
