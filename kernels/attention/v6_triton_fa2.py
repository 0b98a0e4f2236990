"""Attention in Triton, FlashAttention-2 forward: one program per (query tile, head), K/V streamed through it.

A program loads its BLOCK_M x D tile of Q once and walks the keys in tiles of BLOCK_N. Each step is two tensor-core
matmuls (S = Q K^T, then O += P V) with fp32 accumulators, and the online softmax between them: a running row
max m and row sum l, the accumulator rescaled by exp(m_old - m_new) whenever the max grows, one division by l at
the very end. The exponentials are exp2: the softmax scale is folded into log2(e) * scale once, so every score
costs one multiply and one ex2.approx (MUFU) instead of a multiply, a multiply by log2(e) and an exp.

Causal (top-left aligned, SDPA's is_causal): key tiles past the tile's last query row are never visited; key tiles
entirely at or below the diagonal run the unmasked loop, and only the one or two tiles that straddle the diagonal
(or the ragged end of Sk) run the masked loop. The program also stores the natural-log logsumexp of each row (fp32,
4 B per row: noise next to the D*2 = 256 B of each fp16 O row at D = 128) so the backward
(``attention_bwd/triton_fa2_bwd``) can rebuild P tile by tile: ``fa2_forward`` returns (o, lse).

Napkin numbers, H200 (989 TFLOP/s dense fp16, 4.8 TB/s): B*H = 16, S = 16K, D = 128 is 4*16*16K^2*128 = 2.2 TFLOP,
2.2 ms at peak, against 4*16*16K*128*2 B = 268 MB of Q, K, V, O (56 us): compute bound by 40x. The kernel only
needs to keep the tensor cores fed: 128x64 or 128x128 tiles, 2-4 stages of K/V prefetch, 4-8 warps.

The two loops are written out, not one ``@triton.jit`` step called twice: under the interpreter (cpu mode) a helper
call costs ~0.4 ms (measured here), four times a whole tile step's ~0.1 ms, and the step runs once per key tile.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import dot_precision, smem_per_block, triton_spec, tuned
from kernels.attention.reference import validate
from workbench import OpError, empty, register

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
HEAD_DIMS = (16, 32, 64, 128)  # tl.dot needs >= 16; D = 256 (acc alone 128 regs/thread at 128 rows) untuned


@triton.jit
def fa2_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, Sq, Sk, qk_scale, CAUSAL: tl.constexpr,
                   HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    # q, o: [B*H, Sq, D]; k, v: [B*H, Sk, D]; lse: [B*H, Sq] fp32; qk_scale = scale * log2(e).
    n_m = tl.cdiv(Sq, BLOCK_M)
    pid_m = tl.program_id(0)
    if CAUSAL:  # later query tiles visit more keys: launch them first so the short ones fill the tail
        pid_m = n_m - 1 - pid_m
    bh = tl.program_id(1).to(tl.int64)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m < Sq
    q_base = q_ptr + bh * Sq * HEAD_D
    k_base = k_ptr + bh * Sk * HEAD_D
    v_base = v_ptr + bh * Sk * HEAD_D
    q = tl.load(q_base + offs_m[:, None] * HEAD_D + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)  # running row max, in log2 units
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running row sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)  # unnormalised O: 128x128 fp32 = 64 KiB per program

    # Key tiles [0, full_end) need no mask: every key is < Sk and (causal) <= the tile's first query row.
    if CAUSAL:
        n_end = tl.minimum(Sk, start_m + BLOCK_M)  # keys past the tile's last row are masked for every row
        full_end = (tl.minimum(Sk, start_m + 1) // BLOCK_N) * BLOCK_N
    else:
        n_end = Sk
        full_end = (Sk // BLOCK_N) * BLOCK_N

    for start_n in range(0, full_end, BLOCK_N):
        kv_off = (start_n + offs_n)[:, None] * HEAD_D + offs_d[None, :]
        k = tl.load(k_base + kv_off)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N] fp32, log2 units
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)  # first tile: exp2(-inf) = 0 rescales the empty accumulator
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + kv_off)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new

    # The diagonal tile(s) and the ragged end of Sk: the same step with masks (masked scores are -inf, p = 0).
    for start_n in range(full_end, n_end, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < Sk
        kv_off = cols[:, None] * HEAD_D + offs_d[None, :]
        k = tl.load(k_base + kv_off, mask=col_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        s = tl.where(keep, s, -float("inf"))
        # Every row sees key 0, which sits in the first tile visited, so m_new is finite from the first step on.
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + kv_off, mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new

    acc = acc / l_i[:, None]  # the one division
    o_base = o_ptr + bh * Sq * HEAD_D
    tl.store(o_base + offs_m[:, None] * HEAD_D + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None])
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # log2 units -> natural log: * ln(2)
    tl.store(lse_ptr + bh * Sq + offs_m, lse, mask=row_ok)


def _cfg(bm: int, bn: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)


# Hopper candidates for 16-bit inputs (tensor cores, wgmma). Shared memory: the Q tile BM*D*2 B once plus
# stages * 2 * BN*D*2 B of K and V (D = 128: 128x64 / 3 stages = 32 + 96 = 128 KiB; 128x128 / 3 stages = 224 KiB
# of the 227 KiB). sm_90 registers/thread at D = 64 / 128 (ptxas, no spills): 128x128/8w/3: 184 / 226,
# 128x64/8w/3: 118 / 188, 128x64/4w/3: 222 / spills (pruned at D = 128), 64x64/4w/4: 128 / 168.
CONFIGS = [
    _cfg(128, 128, 8, 3),
    _cfg(128, 64, 8, 3),
    _cfg(128, 64, 4, 3),
    _cfg(128, 128, 8, 2),
    _cfg(128, 64, 8, 4),
    _cfg(64, 64, 4, 4),
]
# fp32 inputs: a true fp32 dot (input_precision="ieee") has no tensor-core path, so Triton lowers it to FMAs with
# operands replicated in registers; only small tiles avoid spills (32x16/8w: 74 regs at D = 128, 64x32/8w: 172 at
# D = 64). fp32 is for checking, not speed: FlashAttention itself takes only fp16/bf16.
FP32_CONFIGS = [
    _cfg(64, 32, 8, 2),
    _cfg(32, 32, 4, 2),
    _cfg(32, 16, 8, 2),
    _cfg(16, 16, 4, 2),
]
# The interpreter runs each program instance in turn (~1 ms each plus ~0.1 ms per tile step), and its times say
# nothing about a GPU: cpu mode runs one small config instead of tuning. 32x16 keeps the check shapes (S <= 100)
# at <= 4 query tiles per head and still exercises both loops (full tiles and the diagonal).
CPU_CONFIG = _cfg(32, 16, 4, 1)


def _smem(cfg: triton.Config, d: int, esize: int) -> int:
    bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
    return (bm * d + max(cfg.num_stages, 1) * 2 * bn * d) * esize


def _acc_regs(cfg: triton.Config, d: int) -> int:
    return cfg.kwargs["BLOCK_M"] * d // (32 * cfg.num_warps)  # fp32 accumulator registers per thread


def _prune(configs: list, named_args: dict, **kw) -> list:
    """Keep the configs (of this dtype) that fit shared memory and leave registers for S and P (no spills)."""
    d = kw.get("HEAD_D", 128)
    esize = named_args["q_ptr"].element_size()
    keep = [c for c in configs if _smem(c, d, esize) <= smem_per_block()
            and _acc_regs(c, d) <= (16 if esize == 4 else 64)]
    return keep or [FP32_CONFIGS[-1]]


def tuner(mode: str | None = None) -> Any:
    """Return the forward kernel tuned as a launch in ``mode`` (default: this one) runs it."""
    return tuned(fa2_fwd_kernel, CONFIGS, fp32_configs=FP32_CONFIGS, dtype_arg="q_ptr", cpu_config=CPU_CONFIG,
                 key=["Sq", "Sk", "HEAD_D", "CAUSAL"], prune=_prune, mode=mode)


_tuned = tuner()


def _why_not_head_dim(d: int) -> str | None:
    if d in HEAD_DIMS:
        return None
    return (f"attention/triton_fa2: head dim D={d} is not supported; the Triton FlashAttention-2 kernels take D in "
            f"{list(HEAD_DIMS)} (powers of two 16..128: tl.dot needs >= 16, and the tile configs are sized for "
            "D <= 128)")


def _supports(shape: dict) -> str | None:
    return _why_not_head_dim(int(shape["D"]))


def fa2_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the FlashAttention-2 forward and return (o [B,H,Sq,D], lse [B,H,Sq] fp32, natural log)."""
    shape = validate(q, k, v, causal, scale)
    why = _why_not_head_dim(shape["D"])
    if why:
        raise OpError(why)
    b, h, sq, sk, d = (shape[x] for x in ("B", "H", "Sq", "Sk", "D"))
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    o = empty(q.shape, q.dtype, q.device)
    lse = empty((b, h, sq), torch.float32, q.device)
    if b * h * sq == 0:
        return o, lse
    if sk == 0:  # no keys: the reference's empty softmax times an empty V is 0; logsumexp over nothing is -inf
        return o.zero_(), lse.fill_(-math.inf)
    args = (q, k, v, o, lse, sq, sk, scale * LOG2E)
    _tuned[lambda meta: (triton.cdiv(sq, meta["BLOCK_M"]), b * h)](
        *args, CAUSAL=bool(causal), HEAD_D=d, PRECISION=dot_precision(q.dtype))
    return o, lse


def inspect_spec(dtype: str = "fp16", head_dim: int = 128, causal: bool = False, config: triton.Config | None = None
                 ) -> dict:
    """Return the workbench.inspect spec of the forward kernel for one GPU config (default: 128x64, 8 warps)."""
    c = config or CONFIGS[1]
    return triton_spec(fa2_fwd_kernel, dtype, types={"lse_ptr": torch.float32, "qk_scale": float}, CAUSAL=causal,
                       HEAD_D=head_dim, **c.kwargs, PRECISION="ieee" if dtype == "fp32" else "tf32",
                       num_warps=c.num_warps, num_stages=c.num_stages)


@register("attention", "triton_fa2", backend="triton", supports=_supports, inspect_spec=inspect_spec,
          idea="FlashAttention-2: Q tile resident, K/V tiles streamed, online softmax in exp2, causal skips tiles.")
def triton_fa2(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
               scale: float | None = None) -> torch.Tensor:
    return fa2_forward(q, k, v, causal, scale)[0]

