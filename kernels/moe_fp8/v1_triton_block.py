"""FP8 w8a8 MoE in Triton with DeepSeek-V3's block scales: moe's fused pipeline with e4m3 operands.

The launches are moe/triton_fused's plus one, and the same routed row blocks (``moe_topk``, then ``moe_align``):

1. ``quant_groups_kernel``: x[T,d] bf16 -> xq[T,d] e4m3 and xs[T,G(d)] fp32, one scale per token and 128 channels.
2. gate/up: a program owns one row block x one 128-column tile of I. Its K loop steps 128 channels at a time, so
   each step is one quantization group of x and one 128x128 block of w1: ``tl.dot`` of the e4m3 tiles (wgmma
   reads fp8 from shared memory at twice the bf16 rate), then the step's partial sum is scaled by
   ``xs[token, kg] * w1s[e, n // 128, kg]`` and added into an fp32 accumulator. That add is DeepSeek-V3's
   "promotion": their report measured that the H800's fp8 MMA keeps only ~14 bits of the running sum, so a sum
   carried across all of K inside the tensor cores loses precision; summing 128 products there and the rest in
   fp32 registers does not. The epilogue computes silu(gate) * up in fp32 and *requantizes* it: the program's
   128 columns are exactly one group of the [T*k, I] intermediate, so its amax is a row max inside the tile, and
   the down GEMM's A operand (1 B per element plus one scale per 128) is written in one pass, never as bf16.
3. down: the same row blocks times w2[e].T with the same per-step scales; the epilogue multiplies by the router
   weight and adds into out[token] with fp32 atomics (the top-k combine), as in moe/triton_fused.

Rounding to e4m3 is written out (``e4m3_rne``) instead of relying on ``.to(tl.float8e4nv)`` alone: the Triton
3.7 interpreter drops the carry when rounding overflows the mantissa (126.2 becomes 64, not 128) and does not
saturate (500 becomes 256), both measured here; Triton's sm_89 lowering is reported to round twice through fp16
(triton-lang/triton pull request 11753). Rounding onto the e4m3 grid with integer exponent arithmetic and the
1.5 * 2^23 trick (round to nearest even) makes the final cast exact on every backend, for a few integer ops per
element of a memory-bound epilogue.

On a GPU the dots take e4m3 operands. The interpreter has no fp8 dot, so in cpu mode ``DOT_F16`` upcasts both
tiles to fp16 first: every e4m3 value is exact in fp16 and the products are exact in fp32, so the emulated kernel
computes the same sums (up to summation order) with every index, mask, scale and epilogue of the GPU kernel.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import smem_per_block, triton_spec, tuned
from kernels._routing import align_routed, check_routed, route, routing_supports
from kernels._triton_tiles import grouped_tile
from kernels.moe_fp8.reference import FP8, GROUP, groups
from workbench import MODE, empty, register


@triton.jit
def e4m3_rne(v):
    """Round fp32 ``v`` to the nearest e4m3 value (ties to even), saturating at +-448; the result is fp32."""
    a = tl.minimum(tl.abs(v), 448.0)
    biased = a.to(tl.int32, bitcast=True) >> 23  # a's exponent field (0 for zero and fp32 subnormals)
    e = tl.maximum(biased - 127, -6)  # e4m3's subnormals share the spacing of its smallest normal binade, 2^-6
    ulp = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits: spacing 2^(e-3), exact
    inv = ((127 + 3 - e) << 23).to(tl.float32, bitcast=True)  # 2^(3-e): a * inv is exact
    r = ((a * inv + 12582912.0) - 12582912.0) * ulp  # 1.5 * 2^23: fp32 addition rounds y < 2^22 to an integer, RNE
    # The sign goes back on after rounding, from v's sign bit and by a multiply (-x is 0 - x, which makes +0), so
    # -0.0001 and -0.0 give -0 as torch's cast does.
    return tl.where(v.to(tl.int32, bitcast=True) < 0, r * -1.0, r)


# --------------------------------------------------------------------------------------------- activation quant
@triton.jit
def quant_groups_kernel(x_ptr, q_ptr, s_ptr, R, C, G, BLOCK_R: tl.constexpr, GROUP: tl.constexpr):
    # x: [R, C] (any float); q: [R, C] e4m3; s: [R, G] fp32. Program (row block, group): a [BLOCK_R, 128] tile.
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * GROUP + tl.arange(0, GROUP)
    ok = (rows[:, None] < R) & (cols[None, :] < C)
    offs = rows.to(tl.int64)[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    # div_rn: IEEE division, as the contract's float32 recipe (and torch) divides; Triton's `/` is div.full.f32,
    # within 2 ulp, which would move a value sitting next to an e4m3 midpoint to the other side now and then.
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(x), axis=1), 1e-12), 448.0)  # the group's amax lands on 448
    q = e4m3_rne(tl.math.div_rn(x, scale[:, None]))
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=ok)
    tl.store(s_ptr + rows * G + tl.program_id(1), scale, mask=rows < R)


# ------------------------------------------------------------------------------------------------ gate/up kernel
@triton.jit
def moe_fp8_gate_up_kernel(xq_ptr, xs_ptr, w1q_ptr, w1s_ptr, aq_ptr, as_ptr, sorted_ids_ptr, expert_ids_ptr,
                           n_padded_ptr, n_slots, d, I, n_blocks, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                           GROUP: tl.constexpr, GROUP_M: tl.constexpr, DOT_F16: tl.constexpr):
    # xq: [T, d] e4m3, xs: [T, Gd]; w1q: [E, 2I, d] e4m3, w1s: [E, G2I, Gd]; aq: [n_slots, I] e4m3, as: [n_slots, GI].
    # BLOCK_N = BLOCK_K = GROUP = 128: one K step is one scale group, one N tile is one group of the output.
    pid = tl.program_id(0)
    n_n = (I + GROUP - 1) // GROUP
    pid_m, pid_n = grouped_tile(pid, n_blocks, n_n, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(n_padded_ptr):
        return
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert < 0:
        return

    gd = (d + GROUP - 1) // GROUP
    g2i = (2 * I + GROUP - 1) // GROUP
    gi = n_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)  # the padding holds the sentinel n_slots
    row_ok = slot < n_slots
    token = (slot // TOP_K).to(tl.int64)
    offs_n = pid_n * GROUP + tl.arange(0, GROUP)
    col_ok = offs_n < I
    offs_k = tl.arange(0, GROUP)

    a_ptrs = xq_ptr + token[:, None] * d + offs_k[None, :]
    g_ptrs = w1q_ptr + expert * 2 * I * d + offs_n[None, :] * d + offs_k[:, None]  # [128 k, 128 n], K-major
    u_ptrs = g_ptrs + I * d
    xs_ptrs = xs_ptr + token * gd  # + kg
    # Each column's weight-block row: the gate's is pid_n; the up rows I + n straddle two blocks when I % 128 != 0.
    gs_ptrs = w1s_ptr + expert * g2i * gd + (offs_n // GROUP) * gd
    us_ptrs = w1s_ptr + expert * g2i * gd + ((I + offs_n) // GROUP) * gd
    acc_g = tl.zeros((BLOCK_M, GROUP), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, GROUP), dtype=tl.float32)
    for kg in range(0, gd):
        k_ok = offs_k < d - kg * GROUP
        b_ok = k_ok[:, None] & col_ok[None, :]
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=b_ok, other=0.0)
        u = tl.load(u_ptrs, mask=b_ok, other=0.0)
        sa = tl.load(xs_ptrs + kg, mask=row_ok, other=0.0)  # [BLOCK_M]
        sg = tl.load(gs_ptrs + kg, mask=col_ok, other=0.0)  # [128]
        su = tl.load(us_ptrs + kg, mask=col_ok, other=0.0)
        if DOT_F16:  # the interpreter has no fp8 dot: e4m3 -> fp16 is exact, so the sums are the same
            a, g, u = a.to(tl.float16), g.to(tl.float16), u.to(tl.float16)
        # 128 products summed in the tensor cores, the rest in fp32 ("promotion"), each scaled once per step.
        acc_g += tl.dot(a, g) * (sa[:, None] * sg[None, :])
        acc_u += tl.dot(a, u) * (sa[:, None] * su[None, :])
        a_ptrs += GROUP
        g_ptrs += GROUP
        u_ptrs += GROUP

    # SwiGLU in fp32, then requantize: these 128 columns are one group of the intermediate's row.
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u  # columns past I are 0 (zero weights): they do not move the amax
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(h), axis=1), 1e-12), 448.0)
    q = e4m3_rne(tl.math.div_rn(h, scale[:, None]))
    slot64 = slot.to(tl.int64)
    tl.store(aq_ptr + slot64[:, None] * I + offs_n[None, :], q.to(aq_ptr.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])
    tl.store(as_ptr + slot64 * gi + pid_n, scale, mask=row_ok)


# -------------------------------------------------------------------------------------------------- down kernel
@triton.jit
def moe_fp8_down_kernel(aq_ptr, as_ptr, w2q_ptr, w2s_ptr, out_ptr, topk_w_ptr, sorted_ids_ptr, expert_ids_ptr,
                        n_padded_ptr, n_slots, d, I, n_blocks, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, GROUP: tl.constexpr, GROUP_M: tl.constexpr, DOT_F16: tl.constexpr):
    # aq: [n_slots, I] e4m3, as: [n_slots, GI]; w2q: [E, d, I] e4m3, w2s: [E, Gd, GI]; out: [T, d] fp32, zeroed.
    pid = tl.program_id(0)
    n_n = (d + BLOCK_N - 1) // BLOCK_N
    pid_m, pid_n = grouped_tile(pid, n_blocks, n_n, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(n_padded_ptr):
        return
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert < 0:
        return

    gi = (I + GROUP - 1) // GROUP
    gd = (d + GROUP - 1) // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)
    row_ok = slot < n_slots
    slot64 = slot.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = offs_n < d
    offs_k = tl.arange(0, GROUP)

    a_ptrs = aq_ptr + slot64[:, None] * I + offs_k[None, :]
    b_ptrs = w2q_ptr + expert * d * I + offs_n[None, :] * I + offs_k[:, None]
    as_ptrs = as_ptr + slot64 * gi
    bs_ptrs = w2s_ptr + expert * gd * gi + (offs_n // GROUP) * gi
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kg in range(0, gi):
        k_ok = offs_k < I - kg * GROUP
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        sa = tl.load(as_ptrs + kg, mask=row_ok, other=0.0)
        sb = tl.load(bs_ptrs + kg, mask=col_ok, other=0.0)
        if DOT_F16:
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        a_ptrs += GROUP
        b_ptrs += GROUP

    w = tl.load(topk_w_ptr + slot64, mask=row_ok, other=0.0)
    token = slot64 // TOP_K
    tl.atomic_add(out_ptr + token[:, None] * d + offs_n[None, :], acc * w[:, None],
                  mask=row_ok[:, None] & col_ok[None, :], sem="relaxed")


# ------------------------------------------------------------------------------------------------------ configs
def _cfg(warps: int, stages: int, bn: int | None = None) -> triton.Config:
    kw = {"GROUP_M": 8} if bn is None else {"BLOCK_N": bn, "GROUP_M": 8}
    return triton.Config(kw, num_warps=warps, num_stages=stages)


# BLOCK_K is the scale group (128) in both kernels and gate/up's BLOCK_N is too, so only warps and stages are tuned
# there. Each K step keeps the step's dot results live beside the fp32 accumulators until they are scaled in, so
# a program holds 2 * n_b * BLOCK_M * BLOCK_N fp32 values (n_b = 2 weight tiles for gate/up); the prune keeps
# configs with at most 128 of them per thread. Shared memory per stage: (BLOCK_M + n_b * BLOCK_N) * 128 B (e4m3).
# ptxas registers per thread on sm_90 (Triton 3.7, d and I divisible by 16) at BLOCK_M = 16 | 64; BLOCK_M 64 runs
# on QGMMA (fp8 wgmma), BLOCK_M 16 on HMMA (Triton upcasts e4m3 tiles to fp16 for mma.sync: decode still reads
# 1 B per weight, which is what a weight-bound launch needs); "x" = spills, pruned:
#   gate/up  8 warps 3 stages: 142 | 237   8w 4s: 142 | 235   4w 4s: 180 | x (1 KB)   4w 3s: 180 | x
#   down     BLOCK_N 128 4w 4s: 142 | 252   128 8w 4s: 77 | 148   64 4w 4s: 76 | 156   256 8w 3s: 140 | 248
GATE_UP_CONFIGS = [_cfg(8, 3), _cfg(8, 4), _cfg(4, 4), _cfg(4, 3)]
DOWN_CONFIGS = [_cfg(4, 4, 128), _cfg(8, 4, 128), _cfg(4, 4, 64), _cfg(8, 3, 256)]
CPU_BLOCK_M = 16
CPU_DOWN_BLOCK_N = 32  # the interpreter pays per tl op, not per element: d = 33 still takes two N tiles


def block_m_for(n_slots: int, n_experts: int) -> int:
    """Return the align block / BLOCK_M: 16 rows for decode (<= 16 per expert on average), else 64.

    Not 128 as moe/triton_fused takes past 1024 rows per expert: gate/up would need 4 x 128 x 128 fp32 values live
    per program (two accumulators and two step results), 256 registers per thread even with 8 warps.
    """
    if MODE != "gpu":
        return CPU_BLOCK_M
    return 16 if n_slots / max(n_experts, 1) <= 16 else 64


def _prune(n_b: int):
    """Return a prune keeping the configs that fit shared memory and 128 accumulator registers."""
    def prune(configs: list, named_args: dict, **kw) -> list:
        bm = kw.get("BLOCK_M", 64)

        def ok(c: triton.Config) -> bool:
            bn = c.kwargs.get("BLOCK_N", GROUP)
            smem = c.num_stages * (bm + n_b * bn) * GROUP
            live = 2 * n_b * bm * bn // (32 * c.num_warps)  # accumulators + the step's dot results, fp32
            return smem <= smem_per_block() and live <= 128

        return [c for c in configs if ok(c)] or configs[:1]

    return prune


def tuners(mode: str | None = None) -> tuple[Any, Any]:
    """Return the gate/up and down kernels tuned as a launch in ``mode`` (default: this one) runs them.

    cpu mode runs gate/up at 4 warps and down with ``CPU_DOWN_BLOCK_N`` (the interpreter pays per tl op).
    """
    key = ["d", "I", "BLOCK_M"]
    gate_up = tuned(moe_fp8_gate_up_kernel, GATE_UP_CONFIGS, cpu_config=_cfg(4, 1), key=key, prune=_prune(2),
                    mode=mode)
    down = tuned(moe_fp8_down_kernel, DOWN_CONFIGS, cpu_config=_cfg(4, 1, CPU_DOWN_BLOCK_N), key=key,
                 prune=_prune(1), reset_to_zero=["out_ptr"], mode=mode)
    return gate_up, down


_gate_up, _down = tuners()


# --------------------------------------------------------------------------------------------------- host side
def quant_groups(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a[R,C] to (e4m3 q[R,C], fp32 scales[R,G(C)]), one scale per row and 128 columns, on the device."""
    r, c = a.shape
    g = groups(c)
    q = empty((r, c), FP8, a.device)
    s = empty((r, g), torch.float32, a.device)
    if r and c:
        block_r = 16 if MODE != "gpu" else 4  # GPU: 4 rows x 128 = 512 elements, 4 per thread at 4 warps
        quant_groups_kernel[(triton.cdiv(r, block_r), g)](a.contiguous(), q, s, r, c, g, BLOCK_R=block_r,
                                                          GROUP=GROUP, num_warps=4)
    return q, s


def fused_moe_fp8(x: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor, w2q: torch.Tensor, w2s: torch.Tensor,
                  topk_weights: torch.Tensor, topk_ids: torch.Tensor, block_m: int | None = None) -> torch.Tensor:
    """Run the fp8 experts on routed tokens and return out[T,d] in x's dtype (weights as in the moe_fp8 contract).

    ``topk_weights[T,k]`` float32 and ``topk_ids[T,k]`` int32 come from routing; ``block_m`` is the align block
    (default ``block_m_for``), a multiple of 16.
    """
    t, d = x.shape
    e, two_i, _ = w1q.shape
    i = two_i // 2
    k = topk_ids.shape[1]
    bm = check_routed("moe_fp8/triton_block", t, topk_weights, topk_ids,
                      block_m_for(t * k, e) if block_m is None else block_m)
    out32 = torch.zeros((t, d), dtype=torch.float32, device=x.device)  # atomics add into it: zeros, not poison
    if t == 0:
        return out32.to(x.dtype)
    xq, xs = quant_groups(x)
    weights, sorted_ids, expert_ids, n_padded = align_routed(topk_weights, topk_ids, e, bm)
    n_slots = t * k
    n_blocks = expert_ids.shape[0]
    aq = empty((n_slots, i), FP8, x.device)  # the requantized SwiGLU output: 1 B per element
    a_s = empty((n_slots, groups(i)), torch.float32, x.device)
    up_args = (xq, xs, w1q, w1s, aq, a_s, sorted_ids, expert_ids, n_padded, n_slots, d, i, n_blocks)
    down_args = (aq, a_s, w2q, w2s, out32, weights, sorted_ids, expert_ids, n_padded, n_slots, d, i, n_blocks)
    emulate = MODE != "gpu"  # the interpreter has no fp8 dot: upcast the tiles to fp16 (exact for e4m3)
    kw = {"TOP_K": k, "BLOCK_M": bm, "GROUP": GROUP, "DOT_F16": emulate}
    _gate_up[(n_blocks * groups(i),)](*up_args, **kw)
    _down[lambda m: (n_blocks * triton.cdiv(d, m["BLOCK_N"]),)](*down_args, **kw)
    return out32.to(x.dtype)


# -------------------------------------------------------------------------------------------------- inspection
def inspect_spec(kernel: str = "gate_up", block_m: int = 64, config: triton.Config | None = None) -> dict:
    """Return the workbench.inspect spec of the gate/up (default), down or quant kernel as a GPU launch builds it.

    Defaults: gate/up ``GATE_UP_CONFIGS[0]`` (8 warps, 3 stages) and down ``DOWN_CONFIGS[0]`` (BLOCK_N 128, 4 warps,
    4 stages) at BLOCK_M 64 (prefill); ``block_m=16`` is the decode tile.
    """
    f32, i32, fp8 = torch.float32, torch.int32, torch.float8_e4m3fn
    idx = {"sorted_ids_ptr": i32, "expert_ids_ptr": i32, "n_padded_ptr": i32}
    if kernel == "quant":
        return triton_spec(quant_groups_kernel, torch.bfloat16, types={"q_ptr": fp8, "s_ptr": f32},
                           divisible_ints=["C"], BLOCK_R=4, GROUP=GROUP, num_warps=4, num_stages=1)
    if kernel == "gate_up":
        c = config or GATE_UP_CONFIGS[0]
        fn, types = moe_fp8_gate_up_kernel, {"xs_ptr": f32, "w1s_ptr": f32, "as_ptr": f32, **idx}
    elif kernel == "down":
        c = config or DOWN_CONFIGS[0]
        fn, types = moe_fp8_down_kernel, {"as_ptr": f32, "w2s_ptr": f32, "out_ptr": f32, "topk_w_ptr": f32, **idx}
    else:
        raise ValueError(f"moe_fp8/triton_block: kernel must be 'gate_up', 'down' or 'quant', got {kernel!r}")
    # As launched for a real layer: d and I multiples of 16 let Triton vectorise the row loads (16 B per thread).
    return triton_spec(fn, fp8, types=types, divisible_ints=["d", "I"], TOP_K=8, BLOCK_M=block_m, GROUP=GROUP,
                       **c.kwargs, DOT_F16=False, num_warps=c.num_warps, num_stages=c.num_stages)


# bf16_dot=False: bf16 is only x and the output here; the dots take e4m3 (GPU) or exact fp16 (interpreter) tiles.
@register("moe_fp8", "triton_block", backend="triton", supports=routing_supports("moe_fp8/triton_block"),
          inspect_spec=inspect_spec, bf16_dot=False,
          idea="e4m3 grouped GEMMs, fp32 promotion every 128 of K, SwiGLU + 1x128 requant fused into gate/up.")
def triton_block(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor,
                 w2q: torch.Tensor, w2s: torch.Tensor, top_k: int, renormalize: bool = True) -> torch.Tensor:
    weights, ids = route(router_logits, top_k, renormalize)
    return fused_moe_fp8(x, w1q, w1s, w2q, w2s, weights, ids)
