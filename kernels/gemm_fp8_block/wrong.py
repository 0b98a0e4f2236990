"""Known-wrong gemm_fp8_block kernel: every K step scales a's partial sum with the scale of a's first K group.

``wrong_scale_first_group`` is ``triton_block``'s kernel with one line changed: a's scale is read at
``as_ptr + rm * n_groups``, the row's first entry, instead of ``as_ptr + rm * n_groups + g``, the entry of the
group the step multiplies. It is the per-tensor habit carried over (gemm_fp8 reads its scale once, at one address)
or an index that forgot the loop variable, and it is right whenever K <= 128: one group, one scale. Every test at
K = 64 passes; only a K past 128 (the check shapes' K = 300 and 260) shows it.

Each row's groups 1, 2, ... are then off by the ratio of two groups' scales, amax(group 0) / amax(group g) of that
row: the largest of 128 N(0, 1) values is 2.3 to 3.5 (5th to 95th percentile), so the ratio is off 1 by 13% at the
median and by 31% at the 90th percentile. At K = 300 the median output element is off by 13% of its value, over
80% of them past the tolerance, with no tile, tail or common factor to it. What the checker says,
honestly: ``scattered``. The diagnosis names the pattern, not the cause; that K <= 128 passes and K = 300 fails
is the clue, and the spot-the-bug drill's key is the line.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.gemm_fp8_block.v1_triton_block import CPU_CFG, GPU_CFG
from workbench import MODE, empty, register


@triton.jit
def fp8_block_first_scale_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                                 GROUP: tl.constexpr, DOT_F16: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, GROUP)
    n_groups = (K + GROUP - 1) // GROUP
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for g in range(0, n_groups):
        ks = g * GROUP + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        sa = tl.load(as_ptr + rm * n_groups, mask=rm < M, other=0.0)  # BUG: group 0's scale at every step (+ g)
        sb = tl.load(bs_ptr + (rn // GROUP) * n_groups + g, mask=rn < N, other=0.0)
        if DOT_F16:  # the interpreter has no fp8 dot: e4m3 -> fp16 is exact, so the sums are the same
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@register("gemm_fp8_block", "wrong_scale_first_group", backend="triton", bf16_dot=False,
          expected_diagnosis="scattered",
          idea="KNOWN WRONG: scales every K step's partial with a's first-group scale: right only when K <= 128.")
def wrong_scale_first_group(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
                            ) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:
        return c
    cfg, warps, stages = (GPU_CFG, 8, 3) if MODE == "gpu" else (CPU_CFG, 4, 1)
    grid = (triton.cdiv(m, cfg["BM"]), triton.cdiv(n, cfg["BN"]))
    fp8_block_first_scale_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, **cfg, DOT_F16=MODE != "gpu",
                                       num_warps=warps, num_stages=stages)
    return c
