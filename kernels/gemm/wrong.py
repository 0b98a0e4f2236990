"""Known-wrong gemm kernels: each keeps one classic bug so tests can assert the checker names it."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench import empty, register

BM, BN, BK = 16, 16, 16


@triton.jit
def gemm_fp16_acc(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        # BUG: the running sum is rounded to fp16 after every K step (11-bit mantissa, ~5e-4 relative).
        acc = (acc + tl.dot(a, b, input_precision="ieee")).to(tl.float16).to(tl.float32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@register("gemm", "wrong_fp16_accumulator", backend="triton", expected_diagnosis="precision",
          dtypes=("float32",),
          idea="KNOWN WRONG: rounds the accumulator to fp16 after every K tile, losing ~3 digits.")
def wrong_fp16_accumulator(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = empty((m, n), a.dtype, a.device)
    gemm_fp16_acc[(triton.cdiv(m, BM), triton.cdiv(n, BN))](a, b, c, m, n, k, BM=BM, BN=BN, BK=BK)
    return c
