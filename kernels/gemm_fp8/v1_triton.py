"""FP8 (e4m3) GEMM in Triton for Hopper: fp8 tl.dot lowers to wgmma with fp32 accumulation, scales applied once."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels._triton_tiles import grouped_tile, load_tile
from workbench import empty, register


@triton.jit
def fp8_kernel(a_ptr, bt_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped program order (see gemm's triton_grouped). b comes K-major (bt[N,K]): the [BK, BN] tile is read
    # as a transposed view, which is the operand layout FP8 wgmma wants, so no shuffle in shared memory.
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, (M + BM - 1) // BM, (N + BN - 1) // BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = load_tile(a_ptr, rm, k0 + rk, M, K)
        b = tl.load(bt_ptr + rn[None, :] * K + (k0 + rk)[:, None],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # e4m3 x e4m3 -> fp32 on the tensor cores (2x the bf16 rate on H100/H200)
    scale = tl.load(sa_ptr) * tl.load(sb_ptr)  # per-tensor: one multiply per output, after the K loop
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], (acc * scale).to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


CFG = {"BM": 128, "BN": 256, "BK": 128, "GROUP_M": 8}  # (128 + 256) x 128 B = 48 KiB per stage, 3 stages


def _spec() -> dict:
    # As launched at the bench shapes: Triton specialises integer arguments divisible by 16, and N, K % 16 == 0
    # is what makes the rows 16-byte loads (LDGSTS.128 through cp.async). Without that mark the compile shows
    # byte loads, no pipeline and 2 KB of spills (255 registers) that a real launch does not have; with it:
    # 189 registers, 0 spills, 3 x 48 KiB stages, QGMMA (sm_90, Triton 3.7).
    return triton_spec(fp8_kernel, torch.float8_e4m3fn,
                       types={"c_ptr": torch.bfloat16, "sa_ptr": torch.float32, "sb_ptr": torch.float32},
                       divisible_ints=["N", "K"], **CFG, num_warps=8, num_stages=3)


@register("gemm_fp8", "triton_fp8_hopper", backend="triton", gpu_only=True, inspect_spec=_spec,
          gpu_note="FP8 tl.dot needs sm_89+ (wgmma on sm_90); the interpreter has no fp8 dot",
          idea="e4m3 128x256x128 tiles into fp32 wgmma accumulators; the per-tensor scales applied once at the end.")
def triton_fp8_hopper(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
                      ) -> torch.Tensor:
    m, k = a.shape
    n = bt.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    grid = (triton.cdiv(m, CFG["BM"]) * triton.cdiv(n, CFG["BN"]),)
    fp8_kernel[grid](a, bt, c, scale_a, scale_b, m, n, k, **CFG, num_warps=8, num_stages=3)
    return c
