"""INT8 GEMM in Triton: int8 tiles into ``tl.dot`` with an int32 accumulator, the two scales in the epilogue.

Each program owns a BM x BN tile of c (grouped program order, as gemm's ``triton_grouped``) and walks K in BK
steps. Three things make it a w8a8 GEMM:

1. ``tl.dot(a, b, acc, out_dtype=tl.int32)`` on int8 tiles: the sum is exact integer arithmetic (IMMA on Ampere,
   int8 wgmma on Hopper, twice the bf16 tensor-core rate). ``out_dtype`` must be given: the default accumulator
   type is fp32 and Triton refuses an int32 ``acc`` without it.
2. ``b`` arrives as the weight ``[N, K]``: the [BK, BN] operand is a transposed view of its rows, no copy.
3. The scales are applied once per output, after the K loop: ``acc.to(float32) * scale_a[rm][:, None] *
   scale_b[rn][None, :]``, then bf16. Both are constant along K, so they leave the sum; applying them inside the
   loop would cost a multiply per multiply-add and force a float accumulator (``wrong_scale_first``).

Masked lanes load 0, which adds nothing to an integer sum, so ragged M, N and K (K need not be a multiple of 4,
16 or BK) need no special case. Triton's interpreter runs int8 ``tl.dot`` with int32 output exactly (numpy
integer matmul), so cpu mode runs the same kernel with small tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels._triton_tiles import grouped_tile, load_tile
from workbench import MODE, empty, register

from .reference import OP_NAME


@triton.jit
def w8a8_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k0 in range(0, K, BK):
        a = load_tile(a_ptr, rm, k0 + rk, M, K)  # [BM, BK] int8, 0 past the edges
        b = tl.load(b_ptr + rn[None, :] * K + (k0 + rk)[:, None],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0)  # [BK, BN]: b's rows, transposed
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)  # exact integer sums
    sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
    c = acc.to(tl.float32) * sa[:, None] * sb[None, :]  # the epilogue: one conversion and two multiplies per output
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


# A GPU: 128 x 256 tiles, K steps of 128 int8 (128 B per row), as triton_fp8_hopper's; (128 + 256) x 128 B = 48 KiB
# per stage. The interpreter pays per program and per K step: 32 x 32 x 32 in cpu mode.
GPU_CFG = {"BM": 128, "BN": 256, "BK": 128, "GROUP_M": 8}
CPU_CFG = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 8}


def _spec() -> dict:
    # The GPU launch, for wb.inspect: N and K multiples of 16 as at the bench shapes (16-byte row loads).
    return triton_spec(w8a8_kernel, torch.int8,
                       types={"c_ptr": torch.bfloat16, "sa_ptr": torch.float32, "sb_ptr": torch.float32},
                       divisible_ints=["N", "K"], **GPU_CFG, num_warps=8, num_stages=3)


@register(OP_NAME, "triton_int8", backend="triton", bf16_dot=False, inspect_spec=_spec, idea=(
    "int8 tiles into tl.dot with an int32 accumulator (exact sums); scale_a[m] * scale_b[n] once, at the end."))
def triton_int8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:  # a grid of 0 programs is a launch error: an empty result, as torch gives
        return c
    cfg, warps, stages = (GPU_CFG, 8, 3) if MODE == "gpu" else (CPU_CFG, 4, 1)
    grid = (triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"]),)
    w8a8_kernel[grid](a, b, c, scale_a, scale_b, m, n, k, **cfg, num_warps=warps, num_stages=stages)
    return c
