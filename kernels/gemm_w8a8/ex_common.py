"""What the gemm_w8a8 exercise shares: the given int8 GEMM kernel around the learner's epilogue, and its launch.

``int8-epilogue`` (Triton) writes ``int8_epilogue(acc, sa_ptr, sb_ptr, rm, rn, M, N) -> [BM, BN] bf16``: the
exact int32 sums of one output tile turned into the op's output. ``epilogue_kernel`` (here) runs
``triton_int8``'s K loop (int8 tiles into ``tl.dot`` with an int32 accumulator), calls the helper once per tile
and stores what it returns; :func:`int8_gemm` binds and launches it.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers
from kernels._triton_tiles import load_tile

BM = BN = BK = 32  # the interpreter pays per program and per K step: small tiles (the check's K reach 131)

int8_epilogue = None  # the helper epilogue_kernel calls: bound per launch by int8_gemm


@triton.jit
def epilogue_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k0 in range(0, K, BK):
        a = load_tile(a_ptr, rm, k0 + rk, M, K)
        b = tl.load(b_ptr + rn[None, :] * K + (k0 + rk)[:, None],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    c = int8_epilogue(acc, sa_ptr, sb_ptr, rm, rn, M, N)  # the exercise's helper: int32 sums -> bf16 outputs
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_gemm(int8_epilogue: Any, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
              scale_b: torch.Tensor) -> torch.Tensor:
    """Return gemm_w8a8(a, b, scale_a, scale_b) from epilogue_kernel with the learner's ``int8_epilogue``."""
    kernel = with_helpers(epilogue_kernel, "int8_gemm", int8_epilogue=int8_epilogue)
    m, k = a.shape
    n = b.shape[0]
    c = wb.empty((m, n), torch.bfloat16, a.device)
    if c.numel():
        kernel[(triton.cdiv(m, BM), triton.cdiv(n, BN))](a, b, c, scale_a, scale_b, m, n, k, BM=BM, BN=BN, BK=BK)
    return c
