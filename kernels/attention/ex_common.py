"""The given part of the two Triton attention exercises: the FlashAttention forward kernel and its launch.

``flash_fwd_kernel`` owns a tile of BLOCK_M query rows and walks the key tiles with the online softmax. It calls
three helpers by name, which the exercises write:

- ``online_update(l_i, acc, p, v, m_i, m_new) -> (l_i, acc)``: exercise ``attention-online-softmax``;
- ``key_tiles_end(pid_m, Sk, BLOCK_M, CAUSAL)``, where the loop over keys stops, and
  ``causal_mask(s, offs_m, offs_n, CAUSAL)``, the scores with masked pairs at -inf: ``attention-causal-skip``.

A starter writes its helpers and calls :func:`flash_forward` with them. A helper it does not pass is, for
``online_update``, the solved one of ``ex_online_solution.py`` (each helper is written once), and for the causal
pair the non-causal one (all key tiles, no mask), so ``causal=True`` then raises NotImplementedError.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers

BLOCK_M = BLOCK_N = 16  # small square tiles: S = 40 takes three steps, and query tile i's diagonal is key tile i

# The three helpers flash_fwd_kernel calls: bound per launch by flash_forward (kernels/_triton_hooks.py).
online_update = key_tiles_end = causal_mask = None


@triton.jit
def flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Sq, Sk, D, scale, CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)  # which tile of BLOCK_M query rows
    bh = tl.program_id(1).to(tl.int64)  # which (batch, head): q, k, v, o are contiguous [B*H, S, D]
    q_ptr += bh * Sq * D
    o_ptr += bh * Sq * D
    k_ptr += bh * Sk * D
    v_ptr += bh * Sk * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = (offs_m[:, None] < Sq) & (offs_d[None, :] < D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=row_ok, other=0.0)  # read once, reused Sk times

    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)  # running max of each row's scores
    l_i = tl.zeros((BLOCK_M,), tl.float32)  # running sum of exp(s - m_i)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)  # running sum of exp(s - m_i) * v
    hi = key_tiles_end(pid_m, Sk, BLOCK_M, CAUSAL)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        col_ok = (offs_n[:, None] < Sk) & (offs_d[None, :] < D)
        k = tl.load(k_ptr + offs_n[:, None] * D + offs_d[None, :], mask=col_ok, other=0.0)
        v = tl.load(v_ptr + offs_n[:, None] * D + offs_d[None, :], mask=col_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # [BLOCK_M, BLOCK_N] scores, fp32
        s = tl.where(offs_n[None, :] < Sk, s, -float("inf"))  # keys past Sk add exp(-inf) = 0
        s = causal_mask(s, offs_m, offs_n, CAUSAL)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: every row sees key start_n <= its own index
        p = tl.exp(s - m_new[:, None])
        l_i, acc = online_update(l_i, acc, p, v, m_i, m_new)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_ptr + offs_m[:, None] * D + offs_d[None, :], o.to(o_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def all_key_tiles(pid_m, Sk, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """Return Sk: the non-causal loop visits every key tile."""
    return Sk


@triton.jit
def no_mask(s, offs_m, offs_n, CAUSAL: tl.constexpr):
    """Return s unchanged: non-causal, every key is seen."""
    return s


def flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  scale: float | None = None, *, online_update: Any = None, key_tiles_end: Any = None,
                  causal_mask: Any = None) -> torch.Tensor:
    """Return attention(q, k, v) from flash_fwd_kernel with these helpers (the ones not given: see the module)."""
    if online_update is None:
        from kernels.attention.ex_online_solution import online_update
    if causal and (key_tiles_end is None or causal_mask is None):
        raise NotImplementedError("flash_forward: this kernel is non-causal; the causal helpers key_tiles_end and "
                                  "causal_mask are exercise attention-causal-skip")
    kernel = with_helpers(flash_fwd_kernel, "flash_forward", online_update=online_update,
                          key_tiles_end=key_tiles_end or all_key_tiles, causal_mask=causal_mask or no_mask)
    b, h, sq, d = q.shape
    sk = k.shape[2]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = wb.empty_like(q)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    block_d = max(16, triton.next_power_of_2(d))  # tl.dot needs every dimension >= 16
    grid = (triton.cdiv(sq, BLOCK_M), b * h)
    kernel[grid](q, k, v, out, sq, sk, d, scale, CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=block_d)
    return out
