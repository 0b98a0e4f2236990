"""Known-wrong attention kernels: FlashAttention-2's forward with one classic bug each, for the checker to name.

One small Triton kernel (a single masked loop over key tiles; ``v6_triton_fa2`` is the tuned version) takes a
``BUG`` constexpr so each variant differs from a correct kernel by exactly one marked line:

- ``no_rescale``: the online-softmax step updates the row sum l with alpha = exp2(m_old - m_new) but forgets to
  rescale the output accumulator. Every key tile that raises a row's max leaves the earlier tiles' P V weighted
  too heavily, so almost every row with more than one key tile is wrong, by a different amount per row.
- ``causal_off_by_one``: the causal mask keeps ``key <= query + 1``: each row also sees the next key (inside its
  query tile), the classic ``<`` versus ``<=`` slip shifted by one.

What the checker says: its generic patterns name *where* elements are wrong (whole rows never written, the last
partial tile, whole tiles, a constant factor), and these bugs make whole rows wrong, each by its own amount, with
no tile or tail pattern: ``scattered``. So the attention contract also recomputes its classic mistakes
(``kernels/attention/reference.py: explain``) and the checker names them: ``online_rescale`` for the first,
``causal_diagonal`` for the second.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from workbench import empty, register

LOG2E = 1.4426950408889634
BLOCK_M, BLOCK_N = 16, 16  # small tiles: several key tiles per row at the check shapes (S = 17..100)


@triton.jit
def fa_wrong_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Sq, Sk, qk_scale, CAUSAL: tl.constexpr, HEAD_D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BUG: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m < Sq
    q = tl.load(q_ptr + bh * Sq * HEAD_D + offs_m[:, None] * HEAD_D + offs_d[None, :], mask=row_ok[:, None],
                other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)
    for start_n in range(0, Sk, BLOCK_N):
        cols = start_n + offs_n0
        col_ok = cols < Sk
        kv_off = bh * Sk * HEAD_D + cols[:, None] * HEAD_D + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        v = tl.load(v_ptr + kv_off, mask=col_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            if BUG == "causal_off_by_one":
                keep = keep & (offs_m[:, None] + 1 >= cols[None, :])  # BUG: should be offs_m >= cols
            else:
                keep = keep & (offs_m[:, None] >= cols[None, :])
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if BUG == "no_rescale":
            acc = tl.dot(p.to(v.dtype), v, acc, input_precision="ieee")  # BUG: should be acc * alpha[:, None]
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_ptr + bh * Sq * HEAD_D + offs_m[:, None] * HEAD_D + offs_d[None, :], o.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None])


def _supports(shape: dict) -> str | None:
    d = int(shape["D"])
    if d in (16, 32, 64, 128):
        return None
    return f"attention/wrong_*: head dim D={d} is not supported; these kernels take D in [16, 32, 64, 128]"


def _run(bug: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None
         ) -> torch.Tensor:
    b, h, sq, d = q.shape
    sk = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    o = empty(q.shape, q.dtype, q.device)
    fa_wrong_kernel[(triton.cdiv(sq, BLOCK_M), b * h)](q, k, v, o, sq, sk, scale * LOG2E, CAUSAL=bool(causal),
                                                       HEAD_D=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BUG=bug)
    return o


@register("attention", "wrong_no_rescale", backend="triton", expected_diagnosis="online_rescale", dtypes=("float32",),
          supports=_supports,
          idea="KNOWN WRONG: online softmax rescales the row sum but not the accumulator when the row max grows.")
def wrong_no_rescale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                     scale: float | None = None) -> torch.Tensor:
    return _run("no_rescale", q, k, v, causal, scale)


@register("attention", "wrong_causal_off_by_one", backend="triton", expected_diagnosis="causal_diagonal",
          dtypes=("float32",), supports=_supports,
          idea="KNOWN WRONG: the causal mask keeps key <= query + 1, so every row also sees the next key.")
def wrong_causal_off_by_one(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                            scale: float | None = None) -> torch.Tensor:
    return _run("causal_off_by_one", q, k, v, causal, scale)
