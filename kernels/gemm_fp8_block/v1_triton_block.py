"""Block-scaled FP8 (e4m3) GEMM in Triton: K steps of one 128-wide group, each partial sum scaled, then summed.

One program owns a BM x BN tile of c and walks K one quantization group (128 elements) per step. The step is what
makes block scaling work:

1. ``tl.dot`` of the [BM, 128] e4m3 tile of a and the [128, BN] e4m3 tile of b (a transposed view of b's K-major
   rows) gives the group's partial sums in fp32, unscaled.
2. That partial is multiplied by the group's scales, ``a_scale[m, g]`` per row and ``b_scale[n // 128, g]`` per
   column (an outer product of two vectors: one multiply per output element and K step, never per MAC), and added
   into the fp32 accumulator.

Because each group has its own scales, they cannot wait until after the K loop as ``gemm_fp8``'s per-tensor ones
do: a kernel that sums all of K first and scales once is wrong as soon as K > 128 (tests/test_gemm_fp8_block.py
submits one to the implement drill), and one that reads the first group's scale at every step is this op's
known-wrong kernel (``wrong.py``). Adding the scaled partial to an fp32 register accumulator every 128
elements of K is also DeepSeek-V3's "promotion": their report measured that the H800's fp8 MMA keeps only ~14 bits
of its running sum, and moves partial sums to fp32 registers every 128 elements (4 wgmma instructions) for that
reason. Rows past M and columns past N load the scale 0; they are never stored.

On a GPU ``tl.dot`` takes the e4m3 tiles (sm_89+; wgmma on sm_90). The Triton interpreter (cpu mode) has no fp8
dot, so there ``DOT_F16`` converts both tiles to fp16 first: every e4m3 value is exactly an fp16 value and their
products are exact in fp32, so the emulated kernel computes the same sums with the same indices, masks and scales.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import MODE, empty, register


@triton.jit
def fp8_block_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                     GROUP: tl.constexpr, DOT_F16: tl.constexpr):
    # a: [M, K] e4m3, as: [M, G] fp32; b: [N, K] e4m3 (K-major), bs: [G(N), G] fp32; c: [M, N] bf16.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, GROUP)
    n_groups = (K + GROUP - 1) // GROUP  # the scales' row length, G = ceil(K / 128)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for g in range(0, n_groups):  # one K step = one quantization group of a and one block column of b
        ks = g * GROUP + rk  # the last group may be ragged: lanes past K load 0 and add nothing
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        sa = tl.load(as_ptr + rm * n_groups + g, mask=rm < M, other=0.0)  # [BM]: row m's scale for group g
        sb = tl.load(bs_ptr + (rn // GROUP) * n_groups + g, mask=rn < N, other=0.0)  # [BN]: block n // 128's
        if DOT_F16:  # the interpreter has no fp8 dot: e4m3 -> fp16 is exact, so the sums are the same
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])  # this group's fp32 partial, scaled, then summed
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


# A GPU: 128 x 128 output tiles, 8 warps (two warpgroups of wgmma), 3 stages of (128 + 128) x 128 B = 32 KiB. The
# interpreter pays per program, so cpu mode uses 32 x 32 tiles (the check shapes have at most 5 of them); the K
# step is one group, 128, in both.
GPU_CFG = {"BM": 128, "BN": 128, "GROUP": 128}
CPU_CFG = {"BM": 32, "BN": 32, "GROUP": 128}


def _spec() -> dict:
    # The GPU launch as compiled for sm_90 at a bench shape (N, K divisible by 16, as Triton specialises them).
    return triton_spec(fp8_block_kernel, torch.float8_e4m3fn,
                       types={"as_ptr": torch.float32, "bs_ptr": torch.float32, "c_ptr": torch.bfloat16},
                       divisible_ints=["N", "K"], **GPU_CFG, DOT_F16=False, num_warps=8, num_stages=3)


@register("gemm_fp8_block", "triton_block", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="K steps of one 128-group: e4m3 tl.dot per step, its fp32 partial times the group's two scales.")
def triton_block(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:  # a grid of 0 programs is a launch error: an empty result, as torch gives
        return c
    cfg, warps, stages = (GPU_CFG, 8, 3) if MODE == "gpu" else (CPU_CFG, 4, 1)
    grid = (triton.cdiv(m, cfg["BM"]), triton.cdiv(n, cfg["BN"]))
    fp8_block_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, **cfg, DOT_F16=MODE != "gpu", num_warps=warps,
                           num_stages=stages)
    return c
