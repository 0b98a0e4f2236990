"""Attention backward in Triton, FlashAttention-2 style: P is rebuilt tile by tile from Q, K and the saved lse.

Three launches:

1. ``fa2_bwd_preprocess``: Delta_i = rowsum(dO_i * O_i) (fp32, one per query row). It is rowsum(P_i * dP_i), the
   term the softmax Jacobian subtracts: dS = P * (dP - Delta).
2. ``fa2_bwd_dkdv``: one program per BLOCK_N tile of keys (and head). K_j and V_j stay on chip; the program
   loops over query tiles, rebuilding P^T = exp2(K Q^T * scale*log2e - lse*log2e) and accumulating in fp32
       dV_j += P^T dO,   dP^T = V dO^T,   dS^T = P^T * (dP^T - Delta),   dK_j += dS^T Q  (times scale once).
3. ``fa2_bwd_dq``: one program per BLOCK_M tile of queries; Q_i, dO_i, lse_i, Delta_i stay on chip, the loop
   over key tiles rebuilds P and dP the same way and accumulates dQ_i += dS K (times scale once).

Why a separate dQ kernel rather than dQ with atomics from the dK/dV loop: every (query tile, key tile) pair would
add a BLOCK_M x D fp32 partial into dQ, i.e. Sk/BLOCK_N read-modify-writes of all of dQ (S = 16K, D = 128,
BLOCK_N = 128: 128 passes over a 8 MiB fp32 buffer, 1 GiB of atomic adds per head where one write of dQ is 4 MiB
of fp16), plus the fp32 scratch buffer and a cast kernel, and the sum order (hence the bits) changes from run to
run. The separate kernel recomputes S = Q K^T and dP = dO V^T (7 tile matmuls instead of 5, +40% FLOPs) but is
deterministic, needs no scratch, and each program writes its dQ tile once. Triton's fused-attention tutorial
makes the same trade (one launch: a dK/dV loop, then a dQ loop); FlashAttention-2's CUDA kernel uses fp32 atomics.

Causal: the dK/dV loop starts at the first query tile that reaches the key tile's diagonal; the dQ loop stops at
the query tile's last row. Tiles fully inside the triangle (and inside Sq/Sk) run without masks; the diagonal
tiles and the ragged ends run the masked copy of the step. The step is written out twice in each kernel, not called
as a ``@triton.jit`` helper: under the interpreter (cpu mode) a helper call costs ~0.4 ms (measured here), several
times a whole tile step, and the step runs once per tile pair.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import dot_precision, smem_per_block, triton_spec, tuned
from kernels.attention_bwd.reference import validate
from workbench import OpError, empty, empty_like, register

OP = "attention_bwd"
# The head dims of attention/triton_fa2, whose forward (o, lse) this backward pairs with.
HEAD_DIMS = (16, 32, 64, 128)


@triton.jit
def fa2_bwd_preprocess(o_ptr, do_ptr, delta_ptr, N, HEAD_D: tl.constexpr, BLOCK: tl.constexpr):
    # o, do: [N = B*H*Sq, D] rows; delta: [N] fp32.
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_D)
    ok = rows < N
    offs = rows.to(tl.int64)[:, None] * HEAD_D + offs_d[None, :]
    o = tl.load(o_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + rows, tl.sum(o * do, axis=1), mask=ok)


@triton.jit
def fa2_bwd_dkdv(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, Sq, Sk, sm_scale,
                 CAUSAL: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 PRECISION: tl.constexpr):
    # One program per (key tile, head). q, do: [B*H, Sq, D]; k, v, dk, dv: [B*H, Sk, D]; lse, delta: [B*H, Sq].
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    col_ok = offs_n < Sk
    kv_off = offs_n[:, None] * HEAD_D + offs_d[None, :]
    k = tl.load(k_ptr + bh * Sk * HEAD_D + kv_off, mask=col_ok[:, None], other=0.0)
    v = tl.load(v_ptr + bh * Sk * HEAD_D + kv_off, mask=col_ok[:, None], other=0.0)
    q_base = q_ptr + bh * Sq * HEAD_D
    do_base = do_ptr + bh * Sq * HEAD_D
    lse_base = lse_ptr + bh * Sq
    delta_base = delta_ptr + bh * Sq
    qk_scale = sm_scale * 1.4426950408889634  # scores in log2 units: one multiply per score, then ex2
    dk = tl.zeros([BLOCK_N, HEAD_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_D], dtype=tl.float32)

    # Query tiles: [m_lo, m_mid) straddle the diagonal (masked), [m_mid, m_full) are full (no mask),
    # [max(m_mid, m_full), Sq) is the ragged tail (masked). Non-causal: m_lo = m_mid = 0.
    m_full = (Sq // BLOCK_M) * BLOCK_M
    if CAUSAL:
        m_lo = (start_n // BLOCK_M) * BLOCK_M  # earlier rows see none of these keys
        diag_end = tl.cdiv(start_n + BLOCK_N - 1, BLOCK_M) * BLOCK_M  # from here on: row >= every key of the tile
        m_mid = tl.maximum(m_lo, tl.minimum(diag_end, m_full))
    else:
        m_lo = 0
        m_mid = 0
    n_diag = (m_mid - m_lo) // BLOCK_M
    tail = tl.maximum(m_mid, m_full)
    n_masked = n_diag + tl.cdiv(tl.maximum(Sq - tail, 0), BLOCK_M)  # causal Sk > Sq: tail can pass Sq

    for start_m in range(m_mid, m_full, BLOCK_M):
        offs_m = start_m + offs_m0
        qo_off = offs_m[:, None] * HEAD_D + offs_d[None, :]
        q = tl.load(q_base + qo_off)
        lse2 = tl.load(lse_base + offs_m) * 1.4426950408889634
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION)  # S^T: [BLOCK_N, BLOCK_M] fp32
        p_t = tl.math.exp2(s_t * qk_scale - lse2[None, :])
        do = tl.load(do_base + qo_off)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)
        delta = tl.load(delta_base + offs_m)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=PRECISION)

    for t in range(0, n_masked):
        start_m = tl.where(t < n_diag, m_lo + t * BLOCK_M, tail + (t - n_diag) * BLOCK_M)
        offs_m = start_m + offs_m0
        row_ok = offs_m < Sq
        qo_off = offs_m[:, None] * HEAD_D + offs_d[None, :]
        q = tl.load(q_base + qo_off, mask=row_ok[:, None], other=0.0)
        lse2 = tl.load(lse_base + offs_m, mask=row_ok, other=0.0) * 1.4426950408889634
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION)
        keep = row_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_m[None, :] >= offs_n[:, None])
        p_t = tl.where(keep, tl.math.exp2(s_t * qk_scale - lse2[None, :]), 0.0)
        do = tl.load(do_base + qo_off, mask=row_ok[:, None], other=0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)
        delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=PRECISION)

    dk = dk * sm_scale  # dS = d(scale * QK^T): the scale comes out once, not per tile
    tl.store(dk_ptr + bh * Sk * HEAD_D + kv_off, dk.to(dk_ptr.dtype.element_ty), mask=col_ok[:, None])
    tl.store(dv_ptr + bh * Sk * HEAD_D + kv_off, dv.to(dv_ptr.dtype.element_ty), mask=col_ok[:, None])


@triton.jit
def fa2_bwd_dq(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, Sq, Sk, sm_scale,
               CAUSAL: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               PRECISION: tl.constexpr):
    # One program per (query tile, head); same layouts as fa2_bwd_dkdv, dq like q.
    n_m = tl.cdiv(Sq, BLOCK_M)
    pid_m = tl.program_id(0)
    if CAUSAL:  # later query tiles visit more keys: launch them first
        pid_m = n_m - 1 - pid_m
    bh = tl.program_id(1).to(tl.int64)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m < Sq
    qo_off = bh * Sq * HEAD_D + offs_m[:, None] * HEAD_D + offs_d[None, :]
    q = tl.load(q_ptr + qo_off, mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptr + qo_off, mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(lse_ptr + bh * Sq + offs_m, mask=row_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(delta_ptr + bh * Sq + offs_m, mask=row_ok, other=0.0)
    k_base = k_ptr + bh * Sk * HEAD_D
    v_base = v_ptr + bh * Sk * HEAD_D
    qk_scale = sm_scale * 1.4426950408889634
    dq = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)

    if CAUSAL:  # as the forward: full tiles up to the tile's first row, masked ones up to its last row
        n_end = tl.minimum(Sk, start_m + BLOCK_M)
        full_end = (tl.minimum(Sk, start_m + 1) // BLOCK_N) * BLOCK_N
    else:
        n_end = Sk
        full_end = (Sk // BLOCK_N) * BLOCK_N

    # Padded query rows (past Sq) load q = dO = 0, lse = Delta = 0: p = 1, dp = 0, ds = 0, and are not stored.
    for start_n in range(0, full_end, BLOCK_N):
        kv_off = (start_n + offs_n0)[:, None] * HEAD_D + offs_d[None, :]
        k = tl.load(k_base + kv_off)
        v = tl.load(v_base + kv_off)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        p = tl.math.exp2(s * qk_scale - lse2[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)

    for start_n in range(full_end, n_end, BLOCK_N):
        cols = start_n + offs_n0
        col_ok = cols < Sk
        kv_off = cols[:, None] * HEAD_D + offs_d[None, :]
        k = tl.load(k_base + kv_off, mask=col_ok[:, None], other=0.0)
        v = tl.load(v_base + kv_off, mask=col_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        p = tl.where(keep, tl.math.exp2(s * qk_scale - lse2[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)

    dq = dq * sm_scale
    tl.store(dq_ptr + qo_off, dq.to(dq_ptr.dtype.element_ty), mask=row_ok[:, None])


def _cfg(bm: int, bn: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)


# Hopper candidates for 16-bit inputs, each compiled for sm_90 without spills at D = 64 and 128 (ptxas registers
# per thread at D = 64 / 128 in brackets). dK/dV keeps two BLOCK_N x D fp32 accumulators (128x128 at 8 warps: 128
# registers per thread) plus K and V, and streams Q/dO tiles; shared memory is K, V once plus stages * 2 Q/dO tiles
# (32x128/8w/3 at D = 128: 64 + 48 = 112 KiB). The tutorial's 128-key x 32-query tile at 4 warps spills at D = 128
# (two 128x128 fp32 accumulators over 128 threads = 256 registers), so the 128-key tiles use 8 warps.
DKDV_CONFIGS = [
    _cfg(32, 128, 8, 3),  # [140 / 231]
    _cfg(64, 128, 8, 3),  # [199 / 255]
    _cfg(16, 128, 8, 3),  # [115 / 204]
    _cfg(64, 64, 8, 3),  # [164 / 215]
    _cfg(32, 64, 4, 4),  # [148 / 231]
]
DQ_CONFIGS = [  # the mirror image: one BLOCK_M x D accumulator, Q and dO resident, K/V streamed
    _cfg(128, 32, 8, 3),  # [107 / 139]
    _cfg(128, 64, 8, 3),  # [132 / 206]
    _cfg(128, 64, 8, 2),  # [132 / 200]
    _cfg(64, 64, 4, 3),  # [132 / 180]
    _cfg(64, 32, 4, 4),  # [94 / 143]
]
# fp32 (input_precision="ieee": FMA dots, no tensor cores) needs small tiles to stay out of local memory.
FP32_DKDV = [_cfg(16, 32, 8, 2), _cfg(16, 16, 4, 2)]  # [80 / 94], [80 / 96]
FP32_DQ = [_cfg(32, 16, 8, 2), _cfg(32, 32, 8, 2), _cfg(16, 16, 4, 2)]  # [62 / 75], [64 / 77], [72 / 78]
# cpu mode: one small config (the interpreter costs ~1 ms per program plus ~0.1 ms per tile step). 16x32 for
# dK/dV and 32x16 for dQ keep both loops (full and masked tiles) in use at the check shapes (S <= 100).
CPU_DKDV = _cfg(16, 32, 4, 1)
CPU_DQ = _cfg(32, 16, 4, 1)
PRE_BLOCK = 64  # rows per preprocess program: 64 x 128 x 2 tensors x 2 B = 32 KiB read


def _pruner(streamed: str, resident: str, smallest: triton.Config):
    """Return a prune keeping the configs (of this dtype) whose tiles fit shared memory, else ``smallest``."""
    def prune(configs: list, named_args: dict, **kw) -> list:
        d = kw.get("HEAD_D", 128)
        esize = named_args["q_ptr"].element_size()

        def smem(c: triton.Config) -> int:  # two streamed tiles per stage, two resident tiles
            return (max(c.num_stages, 1) * 2 * c.kwargs[streamed] + 2 * c.kwargs[resident]) * d * esize

        return [c for c in configs if smem(c) <= smem_per_block()] or [smallest]

    return prune


def tuners(mode: str | None = None) -> tuple[Any, Any]:
    """Return the dK/dV and dQ kernels tuned as a launch in ``mode`` (default: this one) runs them."""
    key = ["Sq", "Sk", "HEAD_D", "CAUSAL"]
    dkdv = tuned(fa2_bwd_dkdv, DKDV_CONFIGS, fp32_configs=FP32_DKDV, dtype_arg="q_ptr", cpu_config=CPU_DKDV, key=key,
                 prune=_pruner("BLOCK_M", "BLOCK_N", FP32_DKDV[-1]), mode=mode)
    dq = tuned(fa2_bwd_dq, DQ_CONFIGS, fp32_configs=FP32_DQ, dtype_arg="q_ptr", cpu_config=CPU_DQ, key=key,
               prune=_pruner("BLOCK_N", "BLOCK_M", FP32_DQ[-1]), mode=mode)
    return dkdv, dq


_dkdv, _dq = tuners()


def _supports(shape: dict) -> str | None:
    d = int(shape["D"])
    if d in HEAD_DIMS:
        return None
    return (f"{OP}/triton_fa2_bwd: head dim D={d} is not supported; the Triton FlashAttention-2 kernels take D in "
            f"{list(HEAD_DIMS)} (powers of two 16..128)")


def fa2_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                 do: torch.Tensor, causal: bool = False, scale: float | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dq, dk, dv) of attention from the saved o and lse (natural log, fp32) and the upstream do."""
    shape = validate(q, k, v, o, lse, do, causal, scale)
    why = _supports(shape)
    if why:
        raise OpError(why)
    b, h, sq, sk, d = (shape[x] for x in ("B", "H", "Sq", "Sk", "D"))
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    dq, dk, dv = empty_like(q), empty_like(k), empty_like(v)
    if b * h * sq == 0 or sk == 0:  # no rows: no gradient flows (dq, dk, dv are all zero)
        return dq.zero_(), dk.zero_(), dv.zero_()
    delta = empty((b, h, sq), torch.float32, q.device)
    rows = b * h * sq
    fa2_bwd_preprocess[(triton.cdiv(rows, PRE_BLOCK),)](o, do, delta, rows, HEAD_D=d, BLOCK=PRE_BLOCK)
    args = (q, k, v, do, lse, delta)
    kw = {"CAUSAL": bool(causal), "HEAD_D": d, "PRECISION": dot_precision(q.dtype)}
    _dkdv[lambda meta: (triton.cdiv(sk, meta["BLOCK_N"]), b * h)](*args, dk, dv, sq, sk, scale, **kw)
    _dq[lambda meta: (triton.cdiv(sq, meta["BLOCK_M"]), b * h)](*args, dq, sq, sk, scale, **kw)
    return dq, dk, dv


def inspect_spec(kernel: str = "dkdv", dtype: str = "fp16", head_dim: int = 128, causal: bool = False,
                 config: triton.Config | None = None) -> dict:
    """Return the workbench.inspect spec of the dK/dV (default) or dQ kernel for one GPU config."""
    if kernel not in ("dkdv", "dq"):
        raise ValueError(f"{OP}/triton_fa2_bwd: kernel must be 'dkdv' or 'dq', got {kernel!r}")
    c = config or (DKDV_CONFIGS[0] if kernel == "dkdv" else DQ_CONFIGS[0])
    return triton_spec(fa2_bwd_dkdv if kernel == "dkdv" else fa2_bwd_dq, dtype,
                       types={"lse_ptr": torch.float32, "delta_ptr": torch.float32, "sm_scale": float},
                       CAUSAL=causal, HEAD_D=head_dim, **c.kwargs, PRECISION="ieee" if dtype == "fp32" else "tf32",
                       num_warps=c.num_warps, num_stages=c.num_stages)


@register(OP, "triton_fa2_bwd", backend="triton", supports=_supports, inspect_spec=inspect_spec,
          idea="FA-2 backward: Delta = rowsum(dO*O), a dK/dV kernel per key tile, a dQ kernel per query tile.")
def triton_fa2_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                   do: torch.Tensor, causal: bool = False, scale: float | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return fa2_backward(q, k, v, o, lse, do, causal, scale)
