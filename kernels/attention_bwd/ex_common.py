"""The given part of exercise attention-bwd-dkdv: a FlashAttention backward in Triton, all but its dK/dV step.

``dq_kernel`` (complete) owns a query tile's dQ and loops over the key tiles; ``dkdv_kernel`` owns a key tile's dK
and dV, loops over the query tiles and calls ``dkdv_step(dk, dv, q, do, v, s, lse, delta, scale) -> (dk, dv)``
for each: the helper the exercise writes. :func:`flash_backward` binds it (kernels/_triton_hooks.py), computes
Delta in torch and launches both kernels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers

BLOCK_M = BLOCK_N = 16  # square tiles: key tile j's diagonal is query tile j, so S = 40 has 3 x 3 tile pairs

dkdv_step = None  # the exercise's helper that dkdv_kernel calls: bound per launch by flash_backward


@triton.jit
def masked_scores(q, k, offs_m, offs_n, Sq, Sk, scale, CAUSAL: tl.constexpr):
    """Return S = scale * q k^T for one [BLOCK_M, BLOCK_N] tile, -inf outside the problem and above the diagonal."""
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
    keep = (offs_m[:, None] < Sq) & (offs_n[None, :] < Sk)
    if CAUSAL:  # top-left aligned: query i sees keys j <= i, also when Sq != Sk
        keep = keep & (offs_m[:, None] >= offs_n[None, :])
    return tl.where(keep, s, -float("inf"))


@triton.jit
def dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, Sq, Sk, D, scale, CAUSAL: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per (query tile, batch*head) owns dQ of its rows and loops over the key tiles.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)  # all tensors are contiguous [B*H, S, D] (lse, delta: [B*H, Sq])
    q_ptr += bh * Sq * D
    do_ptr += bh * Sq * D
    dq_ptr += bh * Sq * D
    k_ptr += bh * Sk * D
    v_ptr += bh * Sk * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q_ok = (offs_m[:, None] < Sq) & (offs_d[None, :] < D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    do = tl.load(do_ptr + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    lse = tl.load(lse_ptr + bh * Sq + offs_m, mask=offs_m < Sq, other=0.0)
    delta = tl.load(delta_ptr + bh * Sq + offs_m, mask=offs_m < Sq, other=0.0)
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, Sk) if CAUSAL else Sk  # key tiles past the diagonal: all masked
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < Sk) & (offs_d[None, :] < D)
        k = tl.load(k_ptr + offs_n[:, None] * D + offs_d[None, :], mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + offs_n[:, None] * D + offs_d[None, :], mask=kv_ok, other=0.0)
        s = masked_scores(q, k, offs_m, offs_n, Sq, Sk, scale, CAUSAL)
        p = tl.exp(s - lse[:, None])  # the forward's probabilities, rebuilt from the saved lse: 0 where masked
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # softmax backward: dS = P * (dP - rowsum(dO * O))
        dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee") * scale  # dQ = scale * dS K
    tl.store(dq_ptr + offs_m[:, None] * D + offs_d[None, :], dq.to(dq_ptr.dtype.element_ty), mask=q_ok)


@triton.jit
def dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, Sq, Sk, D, scale,
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
        dk, dv = dkdv_step(dk, dv, q, do, v, s, lse, delta, scale)
    tl.store(dk_ptr + offs_n[:, None] * D + offs_d[None, :], dk.to(dk_ptr.dtype.element_ty), mask=kv_ok)
    tl.store(dv_ptr + offs_n[:, None] * D + offs_d[None, :], dv.to(dv_ptr.dtype.element_ty), mask=kv_ok)


def flash_backward(dkdv_step: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, do: torch.Tensor, causal: bool = False,
                   scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dq, dk, dv) from dq_kernel and dkdv_kernel, the latter calling ``dkdv_step`` for each query tile."""
    dkdv = with_helpers(dkdv_kernel, "flash_backward", dkdv_step=dkdv_step)
    b, h, sq, d = q.shape
    sk = k.shape[2]
    q, k, v, do, lse = q.contiguous(), k.contiguous(), v.contiguous(), do.contiguous(), lse.contiguous()
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    # Delta_i = rowsum(dO_i * O_i) = rowsum(P_i * dP_i): one fp32 number per query row, 2 * Sq * D reads.
    delta = (do.float() * o.float()).sum(-1).contiguous()
    dq, dk, dv = wb.empty_like(q), wb.empty_like(k), wb.empty_like(v)
    block_d = max(16, triton.next_power_of_2(d))  # tl.dot needs every dimension >= 16
    args = (sq, sk, d, scale)
    meta = {"CAUSAL": causal, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_D": block_d}
    dq_kernel[(triton.cdiv(sq, BLOCK_M), b * h)](q, k, v, do, lse, delta, dq, *args, **meta)
    dkdv[(triton.cdiv(sk, BLOCK_N), b * h)](q, k, v, do, lse, delta, dk, dv, *args, **meta)
    return dq, dk, dv
