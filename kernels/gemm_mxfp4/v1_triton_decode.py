"""MXFP4 GEMM in Triton with the decode written out: nibbles to e2m1 values, one fp16 dot per 32-wide K block,
the block's two scales applied to that dot's fp32 result.

What ``tl.dot_scaled`` does (``triton_dot_scaled``), in plain Triton, so it runs everywhere, the interpreter
included. Each program owns a BM x BN tile of c and walks K one MX block (32 values, 16 bytes per row) at a time:

1. Load the [BM, 16] bytes of a and the [16, BN] bytes of b (a transposed view of b's rows) and split each byte
   into its low nibble (element 2j) and high nibble (element 2j + 1); ``tl.join`` + ``reshape`` put them back in
   K order, [BM, 32] and [32, BN].
2. Decode e2m1 arithmetically: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is the
   subnormal 0 or 0.5. Every value (0 .. 6) is exact in fp16, and so is every product (at most 36).
3. ``tl.dot`` the two fp16 blocks into a fresh fp32 block sum, then add ``sum * 2^(sa - 127) * 2^(sb - 127)``: a
   scale is constant over its block, so it multiplies the block's dot once, per (row, column) pair. The scale
   is built from its bits (``s << 23`` is the fp32 pattern of 2^(s - 127) for 1 <= s <= 254).

The cost is one small dot per 32 values of K plus the decode; ``tl.dot_scaled`` on sm_100 hands codes and scales
to the tensor cores directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import MODE, empty, register

from .reference import OP_NAME, validate


@triton.jit
def e2m1_to_f16(code):
    # code: int32 nibbles 0-15 -> their e2m1 values in fp16
    e = (code >> 1) & 3
    m = (code & 1).to(tl.float16)
    sub = m * 0.5  # exponent 0: 0 or 0.5
    normal = (1.0 + m * 0.5) * (1 << (tl.maximum(e, 1) - 1)).to(tl.float16)  # exponents 1-3: 1.x * 2^(e - 1)
    mag = tl.where(e == 0, sub, normal)
    return tl.where((code & 8) != 0, -mag, mag)


@triton.jit
def e8m0_to_f32(s):
    # s: int32 bytes -> 2^(s - 127) in fp32 (0 is 2^-127, a subnormal; 255 is NaN)
    v = (s << 23).to(tl.float32, bitcast=True)
    v = tl.where(s == 0, 5.877471754111438e-39, v)
    return tl.where(s == 255, float("nan"), v)


@triton.jit
def mxfp4_decode_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    # a: [M, K/2] bytes, as: [M, K/32]; b: [N, K/2] bytes, bs: [N, K/32]; c: [M, N] bf16. K % 32 == 0.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rb = tl.arange(0, 16)  # the 16 bytes (32 values) of one block
    kb = K // 2  # bytes per row
    nblk = K // 32
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for j in range(0, nblk):
        pa = tl.load(a_ptr + rm[:, None] * kb + (16 * j + rb)[None, :], mask=rm[:, None] < M, other=0).to(tl.int32)
        pb = tl.load(b_ptr + rn[None, :] * kb + (16 * j + rb)[:, None], mask=rn[None, :] < N, other=0).to(tl.int32)
        av = tl.reshape(tl.join(e2m1_to_f16(pa & 15), e2m1_to_f16(pa >> 4)), (BM, 32))  # [BM, 32] in K order
        bv = tl.reshape(tl.permute(tl.join(e2m1_to_f16(pb & 15), e2m1_to_f16(pb >> 4)), (0, 2, 1)), (32, BN))
        sa = e8m0_to_f32(tl.load(as_ptr + rm * nblk + j, mask=rm < M, other=127).to(tl.int32))
        sb = e8m0_to_f32(tl.load(bs_ptr + rn * nblk + j, mask=rn < N, other=127).to(tl.int32))
        part = tl.dot(av, bv)  # exact: products of e2m1 values summed in fp32
        acc += part * sa[:, None] * sb[None, :]  # the block's scales, once per output
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


GPU_CFG = {"BM": 128, "BN": 128}
CPU_CFG = {"BM": 32, "BN": 32}  # the interpreter pays per program and per block step


def _spec() -> dict:
    return triton_spec(mxfp4_decode_kernel, torch.uint8, types={"c_ptr": torch.bfloat16},
                       divisible_ints=["N", "K"], **GPU_CFG, num_warps=8, num_stages=3)


@register(OP_NAME, "triton_decode", backend="triton", bf16_dot=False, inspect_spec=_spec,
          idea="Decode by hand: nibbles to e2m1 in fp16, one exact dot per 32-value block, its two scales after it.")
def triton_decode(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    shape = validate(a, a_scale, b, b_scale)
    m, n, k = shape["M"], shape["N"], shape["K"]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:
        return c
    cfg, warps = (GPU_CFG, 8) if MODE == "gpu" else (CPU_CFG, 4)
    grid = (triton.cdiv(m, cfg["BM"]), triton.cdiv(n, cfg["BN"]))
    mxfp4_decode_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, **cfg, num_warps=warps)
    return c
