"""MoE in Triton, the vLLM-style fused kernel: route, align, then two grouped GEMM launches over all experts.

The torch loop launches two GEMMs per expert hit, gathers x into a permuted copy and scatters the results back.
Here the whole layer is four launches, whatever the number of experts:

1. ``moe_topk``: softmax over the E router logits and each token's top_k experts -> weights[T,k] f32, ids[T,k].
2. ``moe_align``: the T*k routed *slots* (slot s = t*k + j) sorted by expert, each expert's group padded to
   BLOCK_M rows with the sentinel T*k, plus the expert of every BLOCK_M-row block (-1 past the end). After this,
   every row block of the grouped GEMM belongs to exactly one expert: one weight matrix per program.
3. gate/up: a program owns (one row block) x (one BLOCK_N tile of I). It reads its expert from expert_ids, gathers
   its A rows straight from x through ``token = sorted_ids // top_k`` (no permuted copy of x: a gather costs the
   same DRAM bytes as a contiguous load, and the copy would cost a write and a read of T*k*d elements), and runs
   *one* K loop over d with *two* fp32 accumulators, the gate tile (w1 rows n) and the matching up tile (w1 rows
   I + n). The epilogue applies silu(gate) * up in fp32 and stores a[slot, n]: the [T*k, 2I] gate/up activations
   never reach DRAM, only the [T*k, I] product does.
4. down: the same row blocks times w2[e].T (K = I, N = d); the epilogue multiplies each row by its router weight
   and adds it into out[token] with a float32 ``tl.atomic_add``: the top_k combine is fused (a token's k rows
   live in k different experts' blocks, so atomics are the simplest way to sum them; fp32 keeps the sum exact
   enough, and the order of the k adds is the only nondeterminism). out is zeroed first and cast to x's dtype.

Both GEMMs accumulate in fp32 with ``tl.dot`` (tensor cores for 16-bit inputs, ``input_precision="ieee"`` FMAs
for fp32) and use grouped program order: GROUP_M consecutive row blocks take the same N tile before moving on, so
programs running together read the same expert's weight panel from L2. MoE weights are the dominant bytes: with
GROUP_M = 8 one weight tile fetched from DRAM feeds up to 8 row blocks of the same expert.

BLOCK_M and decode. ``moe_align`` pads every hit expert to BLOCK_M rows, and the grid has one row block per
BLOCK_M rows of the padded buffer, so BLOCK_M is fixed *before* the launch (it is the align block) and chosen
from the expected rows per expert, T*k/E (``block_m_for``). Prefill (T = 4096, k = 2, E = 8: ~1024 rows per
expert) wants 64-row tiles or bigger for tensor-core efficiency (padding under 64/1024 = 6%). Decode (T = 1,
k = 2) has one row per hit expert: a 64-row tile would be 63/64 padding, multiplied on the tensor cores for
nothing, and its 64 x BLOCK_N x 2 fp32 accumulators pin registers that a 16-row tile does not need. Decode is
bound by reading the hit experts' weights (Mixtral, d = 4096, I = 14336: 2 experts x 3*I*d x 2 B = 704 MB,
~150 us at 4.8 TB/s, against 0.7 GFLOP): a 16-row tile makes the kernel a weight stream with 4x less dead MMA
work and fewer registers per program, so more programs stream weights at once. The live programs at decode are
experts hit x N tiles (Mixtral's down GEMM: 2 x 4096/64 = 128 programs for 132 SMs; a split-K launch would add
more and is not done here). 16 rows is the floor: tl.dot needs M >= 16 (mma.sync m16n8k16); wgmma needs 64-row
warpgroup tiles, so decode tiles run on mma.sync, which is plenty for a memory-bound kernel.

The grouped program order and SiLU are written out in each kernel, not called as ``@triton.jit`` helpers: under the
interpreter (cpu mode) a helper call costs ~0.4 ms per program (measured here), a third of a small program's cost.
``fused_moe`` is the public entry point after routing (notebooks and exercises reuse it).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._launch import dot_precision, smem_per_block, triton_spec, tuned
from kernels._routing import align_routed, check_routed, route, routing_supports
from kernels._triton_tiles import grouped_tile
from workbench import MODE, empty, register


# ------------------------------------------------------------------------------------------------ gate/up kernel
@triton.jit
def moe_gate_up_kernel(x_ptr, w1_ptr, a_ptr, sorted_ids_ptr, expert_ids_ptr, n_padded_ptr, n_slots, d, I,
                       n_blocks, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # x: [T, d]; w1: [E, 2I, d] (rows 0..I-1 gate, I..2I-1 up); a: [n_slots, I], row = slot.
    # 1-D grid of n_blocks row blocks x cdiv(I, BLOCK_N) tiles in grouped order (GROUP_M row blocks per group).
    pid = tl.program_id(0)
    n_n = (I + BLOCK_N - 1) // BLOCK_N  # written out: tl.cdiv is a @jit helper (~0.4 ms a call when interpreted)
    pid_m, pid_n = grouped_tile(pid, n_blocks, n_n, GROUP_M)

    # The grid covers the worst case padding (no host sync on the counts); blocks past n_padded exit at once.
    if pid_m * BLOCK_M >= tl.load(n_padded_ptr):
        return
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)  # int64: E * 2I * d passes 2^31 for big layers
    if expert < 0:
        return

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)  # int32; the padding holds the sentinel n_slots
    row_ok = slot < n_slots
    token = (slot // TOP_K).to(tl.int64)  # the A row is x[token]: gathered in place, never copied
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = offs_n < I
    offs_k = tl.arange(0, BLOCK_K)

    a_ptrs = x_ptr + token[:, None] * d + offs_k[None, :]  # [BLOCK_M, BLOCK_K]
    # w1[e, n, k] read as a [BLOCK_K, BLOCK_N] tile (k down, n across): the B operand of x @ w1[e].T.
    g_ptrs = w1_ptr + expert * 2 * I * d + offs_n[None, :] * d + offs_k[:, None]
    u_ptrs = g_ptrs + I * d  # the matching up rows, I rows further down
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, d, BLOCK_K):
        k_ok = offs_k < d - k0
        b_ok = k_ok[:, None] & col_ok[None, :]
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=b_ok, other=0.0)
        u = tl.load(u_ptrs, mask=b_ok, other=0.0)
        acc_g = tl.dot(a, g, acc_g, input_precision=PRECISION)  # the A tile is loaded once for both dots
        acc_u = tl.dot(a, u, acc_u, input_precision=PRECISION)
        a_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K

    # SwiGLU epilogue in fp32: silu(g) * u = g / (1 + exp(-g)) * u (g -> -inf: exp -> inf, g / inf -> -0).
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    a_out = a_ptr + slot.to(tl.int64)[:, None] * I + offs_n[None, :]
    tl.store(a_out, h.to(a_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


# -------------------------------------------------------------------------------------------------- down kernel
@triton.jit
def moe_down_kernel(a_ptr, w2_ptr, out_ptr, topk_w_ptr, sorted_ids_ptr, expert_ids_ptr, n_padded_ptr, n_slots, d,
                    I, n_blocks, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # a: [n_slots, I]; w2: [E, d, I]; out: [T, d] float32, zeroed; topk_w: [n_slots] float32 (weights[T,k] flat).
    # The same row blocks as gate/up, N = d this time: out[token] += w[slot] * (a[slot] @ w2[e].T).
    pid = tl.program_id(0)
    n_n = (d + BLOCK_N - 1) // BLOCK_N
    pid_m, pid_n = grouped_tile(pid, n_blocks, n_n, GROUP_M)

    if pid_m * BLOCK_M >= tl.load(n_padded_ptr):
        return
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert < 0:
        return

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)
    row_ok = slot < n_slots
    slot64 = slot.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = offs_n < d
    offs_k = tl.arange(0, BLOCK_K)

    a_ptrs = a_ptr + slot64[:, None] * I + offs_k[None, :]
    b_ptrs = w2_ptr + expert * d * I + offs_n[None, :] * I + offs_k[:, None]  # w2[e, n, k] as [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        k_ok = offs_k < I - k0
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K

    # Epilogue: router weight, then the top-k combine as fp32 atomics into out[token] (k adds per element).
    w = tl.load(topk_w_ptr + slot64, mask=row_ok, other=0.0)
    acc = acc * w[:, None]
    token = slot64 // TOP_K
    tl.atomic_add(out_ptr + token[:, None] * d + offs_n[None, :], acc, mask=row_ok[:, None] & col_ok[None, :],
                  sem="relaxed")


# ------------------------------------------------------------------------------------------------------ configs
def _cfg(bn: int, bk: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps, num_stages=stages)


# BLOCK_M is not tuned: it is the align block, chosen on the host from the rows per expert (block_m_for) before
# the align kernel runs. The autotuner picks the rest per (d, I, BLOCK_M). Hopper candidates for 16-bit inputs;
# shared memory per stage is (BLOCK_M + n_b * BLOCK_N) * BLOCK_K * 2 B, n_b = 2 weight tiles for gate/up.
# ptxas registers per thread on sm_90 (Triton 3.7, fp16, d and I divisible by 16), gate/up | down, at
# BLOCK_M = 16 / 64 / 128; "x" = spills, pruned (two accumulators of 128 x 128 fp32 over 128 threads = 256 regs):
CONFIGS = [
    _cfg(64, 64, 4, 4),  # 80 | 48, 119 | 72, 216 | 128
    _cfg(128, 64, 4, 3),  # 144 | 88, 220 | 136, x | 211   (the inspect default at BLOCK_M = 64)
    _cfg(64, 128, 4, 3),  # 96 | 64, 158 | 94, 232 | 162
    _cfg(128, 64, 8, 3),  # 80 | 57, 116 | 64, 228 | 126
    _cfg(256, 64, 8, 3),  # 144 | 89, 217 | 128, x | 246
    _cfg(32, 128, 4, 4),  # 64 | 48, 96 | 85, 164 | 143
]
# fp32 (ieee FMA dots, operands replicated in registers): small tiles only. Registers as above: 32x32/4w:
# 72 | 53, 168 | 112, 254 | 168; 32x16/4w: 56 | 56, 128 | 80, 168 | 128; 16x16/4w: 42 | 44, 80 | 62, 128 | 96.
# (64x16/4w spills in gate/up at BLOCK_M = 128.)
FP32_CONFIGS = [_cfg(32, 32, 4, 2), _cfg(32, 16, 4, 2), _cfg(16, 16, 4, 2)]
# cpu mode: one fixed small config. The interpreter's times say nothing about a GPU, and it costs per tl op (tens
# of us each), not per element: a program is ~40 ops of setup plus ~15 per K step, so 32-wide tiles run the check
# shapes in about half the time of 16-wide ones. d = 33 still takes two N tiles and two K steps, both ragged.
CPU_CONFIG = _cfg(32, 32, 4, 1)
CPU_BLOCK_M = 16


def block_m_for(n_slots: int, n_experts: int) -> int:
    """Return the align block / BLOCK_M for n_slots = T*top_k routed rows over n_experts experts.

    Decode-sized problems (<= 16 rows per expert on average) take 16-row tiles; prefill 64, and 128 past 1024 rows
    per expert, where the padding (under BLOCK_M rows per hit expert) is below 128/1024 = 12.5% of the rows.
    """
    if MODE != "gpu":
        return CPU_BLOCK_M
    per_expert = n_slots / max(n_experts, 1)
    return 16 if per_expert <= 16 else 64 if per_expert <= 1024 else 128


def _prune(n_b: int, w_name: str):
    """Return a prune keeping the configs (of this dtype) that fit shared memory and registers."""
    def prune(configs: list, named_args: dict, **kw) -> list:
        bm = kw.get("BLOCK_M", 64)
        esize = named_args[w_name].element_size()
        fp32 = esize == 4

        def ok(c: triton.Config) -> bool:
            bn, bk = c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
            smem = max(c.num_stages, 1) * (bm + n_b * bn) * bk * esize
            acc_regs = n_b * bm * bn // (32 * c.num_warps)  # fp32 accumulator registers per thread
            return smem <= smem_per_block() and acc_regs <= (64 if fp32 else 128)

        return [c for c in configs if ok(c)] or [FP32_CONFIGS[-1] if fp32 else CONFIGS[0]]

    return prune


def tuners(mode: str | None = None) -> tuple[Any, Any]:
    """Return the gate/up and down kernels tuned as a launch in ``mode`` (default: this one) runs them.

    A GPU tunes per (d, I, BLOCK_M); cpu mode runs ``CPU_CONFIG``. The down kernel's atomics add into ``out``, so
    timing runs zero it first.
    """
    common = {"fp32_configs": FP32_CONFIGS, "cpu_config": CPU_CONFIG, "key": ["d", "I", "BLOCK_M"], "mode": mode}
    gate_up = tuned(moe_gate_up_kernel, CONFIGS, dtype_arg="w1_ptr", prune=_prune(2, "w1_ptr"), **common)
    down = tuned(moe_down_kernel, CONFIGS, dtype_arg="w2_ptr", prune=_prune(1, "w2_ptr"), reset_to_zero=["out_ptr"],
                 **common)
    return gate_up, down


_gate_up, _down = tuners()


# --------------------------------------------------------------------------------------------------- host side
def fused_moe(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, block_m: int | None = None) -> torch.Tensor:
    """Run the experts on already-routed tokens and return out[T, d] in x's dtype.

    ``topk_weights[T,k]`` (float32) and ``topk_ids[T,k]`` (int32) come from routing (``moe_topk``); ``block_m``
    is the align block and BLOCK_M of both GEMMs (default: ``block_m_for(T*k, E)``; a multiple of 16).
    """
    t, d = x.shape
    e, two_i, _ = w1.shape
    i = two_i // 2
    k = topk_ids.shape[1]
    bm = check_routed("moe/triton_fused", t, topk_weights, topk_ids,
                      block_m_for(t * k, e) if block_m is None else block_m)
    out32 = torch.zeros((t, d), dtype=torch.float32, device=x.device)  # atomics add into it: zeros, not poison
    if t == 0:
        return out32.to(x.dtype)
    x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
    weights, sorted_ids, expert_ids, n_padded = align_routed(topk_weights, topk_ids, e, bm)
    n_slots = t * k
    n_blocks = expert_ids.shape[0]
    a = empty((n_slots, i), x.dtype, x.device)  # silu(gate) * up per slot, read back by the down GEMM
    kw = {"TOP_K": k, "BLOCK_M": bm, "PRECISION": dot_precision(x.dtype)}
    _gate_up[lambda m: (n_blocks * triton.cdiv(i, m["BLOCK_N"]),)](
        x, w1, a, sorted_ids, expert_ids, n_padded, n_slots, d, i, n_blocks, **kw)
    _down[lambda m: (n_blocks * triton.cdiv(d, m["BLOCK_N"]),)](
        a, w2, out32, weights, sorted_ids, expert_ids, n_padded, n_slots, d, i, n_blocks, **kw)
    return out32 if x.dtype == torch.float32 else out32.to(x.dtype)


# -------------------------------------------------------------------------------------------------- inspection
_DTYPES = ("fp32", "fp16", "bf16")
_INDEX = {"sorted_ids_ptr": torch.int32, "expert_ids_ptr": torch.int32, "n_padded_ptr": torch.int32}


def inspect_spec(kernel: str = "gate_up", dtype: str = "fp16", block_m: int = 64, config: triton.Config | None = None
                 ) -> dict:
    """Return the workbench.inspect spec of the gate/up (default) or down kernel for one GPU config.

    Default config: 16-bit ``CONFIGS[1]`` (BLOCK_N 128, BLOCK_K 64, 4 warps, 3 stages) at BLOCK_M 64 (prefill);
    ``block_m=16`` is the decode tile; fp32 defaults to ``FP32_CONFIGS[0]``.
    """
    if kernel not in ("gate_up", "down"):
        raise ValueError(f"moe/triton_fused: kernel must be 'gate_up' or 'down', got {kernel!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"moe/triton_fused: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    c = config or (FP32_CONFIGS[0] if dtype == "fp32" else CONFIGS[1])
    if kernel == "gate_up":
        fn, types = moe_gate_up_kernel, _INDEX
    else:
        fn, types = moe_down_kernel, {**_INDEX, "out_ptr": torch.float32, "topk_w_ptr": torch.float32}
    # As launched for a real layer (d = 4096, I = 14336): Triton specialises integer arguments divisible by 16, and
    # knowing the row strides d and I are multiples of 16 is what lets it vectorise the tile loads (16 B per thread).
    return triton_spec(fn, dtype, types=types, divisible_ints=["d", "I"], TOP_K=2, BLOCK_M=block_m, **c.kwargs,
                       PRECISION="ieee" if dtype == "fp32" else "tf32", num_warps=c.num_warps,
                       num_stages=c.num_stages)


@register("moe", "triton_fused", backend="triton", supports=routing_supports("moe/triton_fused"),
          inspect_spec=inspect_spec,
          idea="vLLM-style: Triton top-k + align, a gate/up GEMM with fused SwiGLU, a down GEMM with atomic combine.")
def triton_fused(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
                 renormalize: bool = True) -> torch.Tensor:
    weights, ids = route(router_logits, top_k, renormalize)
    return fused_moe(x, w1, w2, weights, ids)
