"""FP8 (e4m3) GEMM in Triton, the plain tile version: one program per output tile, fp32 accumulator, scales once.

The first fp8 GEMM to write, before ``triton_fp8_hopper``'s grouped order and big pipelined tiles: each program
owns a BM x BN tile of c and walks K in BK steps. Three things make it an fp8 GEMM rather than a bf16 one:

1. ``bt`` arrives K-major ([N, K]): the [BK, BN] operand is read through a transposed view of it, the layout
   FP8 tensor-core instructions take.
2. The running sum is fp32. The e4m3 values are the *quantized* numbers (each tensor's amax maps to 448), so one
   product can reach 448^2 = 200,704 and a dot of 64 of them is past fp16's 65,504 (``wrong_fp16_accumulator``).
3. The per-tensor scales are applied once, to the fp32 result after the K loop: one multiply per output instead
   of one per multiply-add, and the sum keeps the range it needs until then.

On a GPU ``tl.dot`` takes the e4m3 tiles (sm_89+; wgmma on sm_90). The Triton interpreter (cpu mode) has no fp8
dot, so there ``DOT_F16`` converts both tiles to fp16 first: every e4m3 value is exactly an fp16 value and
their products are exact in fp32, so the emulated kernel computes the same sums with the same indices and masks.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import MODE, empty, register


@triton.jit
def fp8_tile_kernel(a_ptr, bt_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr, DOT_F16: tl.constexpr):
    # Program (pid_m, pid_n) computes c[rm, rn]; a is [M, K] row-major, bt is [N, K] row-major (b transposed).
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk  # the K tail: lanes past K load 0 and add nothing
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(bt_ptr + rn[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        if DOT_F16:  # the interpreter has no fp8 dot: e4m3 -> fp16 is exact, so the sums are the same
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc = tl.dot(a, b, acc)  # e4m3 x e4m3 products summed in fp32
    scale = tl.load(sa_ptr) * tl.load(sb_ptr)  # dequantize once, on the fp32 sums
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], (acc * scale).to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


# A GPU: 128 x 128 tiles, K steps of 64 e4m3 (64 B per row: whole 32-byte sectors). The interpreter pays per
# program and per tile step, so cpu mode uses 32 x 32 x 32 (the check shapes have at most 4 x 3 such tiles).
GPU_CFG = {"BM": 128, "BN": 128, "BK": 64}
CPU_CFG = {"BM": 32, "BN": 32, "BK": 32}


def _spec() -> dict:
    # The GPU launch (e4m3 tiles straight into tl.dot), for wb.inspect: N, K % 16 == 0 as at the bench shapes.
    return triton_spec(fp8_tile_kernel, torch.float8_e4m3fn,
                       types={"c_ptr": torch.bfloat16, "sa_ptr": torch.float32, "sb_ptr": torch.float32},
                       divisible_ints=["N", "K"], **GPU_CFG, DOT_F16=False, num_warps=8, num_stages=3)


@register("gemm_fp8", "triton_fp8_tile", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="One program per output tile: e4m3 tiles (bt read K-major) into an fp32 accumulator, scales once.")
def triton_fp8_tile(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
                    ) -> torch.Tensor:
    m, k = a.shape
    n = bt.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:  # a grid of 0 programs is a launch error: an empty result, as torch gives
        return c
    cfg, warps = (GPU_CFG, 8) if MODE == "gpu" else (CPU_CFG, 4)
    grid = (triton.cdiv(m, cfg["BM"]), triton.cdiv(n, cfg["BN"]))
    fp8_tile_kernel[grid](a, bt, c, scale_a, scale_b, m, n, k, **cfg, DOT_F16=MODE != "gpu", num_warps=warps)
    return c
