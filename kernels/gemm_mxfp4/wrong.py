"""Known-wrong MXFP4 GEMM: ``triton_decode``'s kernel with one line changed.

* ``wrong_b_nibble_order``: b's bytes are split high nibble first. Packing puts element 2j in a byte's low nibble
  and 2j + 1 in its high one; the a side is decoded in that order, the transposed b side swaps each pair, so every
  block dot pairs a[2j] with b[2j + 1] and a[2j + 1] with b[2j]. Nothing is out of bounds, nothing overflows, no
  scale is wrong: the sums are simply of the wrong products, so the checker sees wrong elements with no pattern
  (``scattered``). Swapping both sides would be harmless (a dot product does not care in which order its pairs
  come): the bug is decoding a and b inconsistently.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import MODE, empty, register

from .reference import OP_NAME, validate
from .v1_triton_decode import CPU_CFG, GPU_CFG, e2m1_to_f16, e8m0_to_f32


@triton.jit
def mxfp4_b_swapped_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
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
        bv = tl.reshape(tl.permute(tl.join(e2m1_to_f16(pb >> 4), e2m1_to_f16(pb & 15)), (0, 2, 1)), (32, BN))
        sa = e8m0_to_f32(tl.load(as_ptr + rm * nblk + j, mask=rm < M, other=127).to(tl.int32))
        sb = e8m0_to_f32(tl.load(bs_ptr + rn * nblk + j, mask=rn < N, other=127).to(tl.int32))
        part = tl.dot(av, bv)  # exact: products of e2m1 values summed in fp32
        acc += part * sa[:, None] * sb[None, :]  # the block's scales, once per output
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@register(OP_NAME, "wrong_b_nibble_order", backend="triton", bf16_dot=False, expected_diagnosis="scattered",
          idea="KNOWN WRONG: b's bytes split high nibble first while a's are low first: every pair of products "
               "is crossed.")
def wrong_b_nibble_order(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor,
                         b_scale: torch.Tensor) -> torch.Tensor:
    shape = validate(a, a_scale, b, b_scale)
    m, n, k = shape["M"], shape["N"], shape["K"]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:
        return c
    cfg, warps = (GPU_CFG, 8) if MODE == "gpu" else (CPU_CFG, 4)
    grid = (triton.cdiv(m, cfg["BM"]), triton.cdiv(n, cfg["BN"]))
    mxfp4_b_swapped_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, **cfg, num_warps=warps)
    return c
