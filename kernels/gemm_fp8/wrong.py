"""Known-wrong gemm_fp8 kernel: the running sum kept in fp16, where unscaled e4m3 products overflow it.

``wrong_fp16_accumulator`` is ``triton_fp8_hopper``'s kernel with one line changed: after every K tile the
accumulator is rounded to fp16 (a kernel that keeps its accumulator in half precision to save registers, or asks
the tensor cores for an fp16 accumulator, which Hopper's fp8 wgmma offers). The per-tensor scale maps each
tensor's amax to 448, so the e4m3 values themselves are large: one product reaches 448^2 = 200,704 and a dot of
K = 64 unit-normal inputs quantized this way is ~1e5 typical, past fp16's largest finite value (65,504). The
scales shrink the result only at the end; until then the sum needs fp32's range, which is why fp8 GEMMs
accumulate in fp32 (DeepSeek-V3 even promotes the tensor cores' limited-precision partial sums to fp32 CUDA-core
registers every 128 elements of K).

It also runs in cpu mode: ``DOT_F16`` upcasts both e4m3 tiles to fp16 before ``tl.dot`` (exact: every e4m3 value
is an fp16 value, and the dot still accumulates in fp32), because the Triton interpreter has no fp8 dot; on a GPU
the dot takes e4m3 operands as the real kernel does.

What the checker says: ``computed_nan``. The fp16 rounding turns the large partial sums into inf, and the scaled
output is inf (or NaN) where the reference is finite: an overflow the kernel computed, not an unwritten element.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._triton_tiles import grouped_tile, load_tile
from workbench import MODE, empty, register


@triton.jit
def fp8_fp16_acc_kernel(a_ptr, bt_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, GROUP_M: tl.constexpr, DOT_F16: tl.constexpr):
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
        if DOT_F16:  # the interpreter has no fp8 dot: e4m3 -> fp16 is exact, so the sums are the same
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc = tl.dot(a, b, acc).to(tl.float16).to(tl.float32)  # BUG: the sum needs fp32's range
    scale = tl.load(sa_ptr) * tl.load(sb_ptr)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], (acc * scale).to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


GPU_CFG = {"BM": 128, "BN": 256, "BK": 128, "GROUP_M": 8}  # triton_fp8_hopper's tiles
CPU_CFG = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 8}  # the interpreter pays per program: small problems, few tiles


@register("gemm_fp8", "wrong_fp16_accumulator", backend="triton", bf16_dot=False,
          expected_diagnosis="computed_nan",
          idea="KNOWN WRONG: rounds the accumulator to fp16 after every K tile: unscaled e4m3 sums overflow it.")
def wrong_fp16_accumulator(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
                           ) -> torch.Tensor:
    m, k = a.shape
    n = bt.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    cfg, warps, stages = (GPU_CFG, 8, 3) if MODE == "gpu" else (CPU_CFG, 4, 1)
    grid = (triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"]),)
    fp8_fp16_acc_kernel[grid](a, bt, c, scale_a, scale_b, m, n, k, **cfg, DOT_F16=MODE != "gpu",
                              num_warps=warps, num_stages=stages)
    return c
