import torch
import triton
import triton.language as tl

from kernels.gemm_w8a8.ex_common import int8_gemm  # the int8 K loop around your epilogue, and its launch


@triton.jit
def int8_epilogue(acc, sa_ptr, sb_ptr, rm, rn, M, N):
    """Return the bf16 output tile of one [BM, BN] block: acc holds its exact int32 sums, rm its rows (tokens) and
    rn its columns (output channels); scale_a has M entries, scale_b has N."""
    # >>> learner
    #> # TODO: c[m, n] = float(acc[m, n]) * scale_a[m] * scale_b[n], rounded to bf16 once. The tile can hang over
    #> #       the matrix's edge: rows rm >= M and columns rn >= N have no scale.
    #> return acc.to(tl.bfloat16)  # so far: the raw integer sums, never scaled
    sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)  # one scale per row (token)
    sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)  # one scale per column (output channel)
    return (acc.to(tl.float32) * sa[:, None] * sb[None, :]).to(tl.bfloat16)
    # <<< learner


def gemm_w8a8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return int8_gemm(int8_epilogue, a, b, scale_a, scale_b)
