# >>> learner
#> # ruff: noqa: F841, B007  (a starter: the TODOs will use these names)
# <<< learner
import torch
import triton
import triton.language as tl

import workbench as wb

BM, BN, BK, GROUP_M = 32, 32, 32, 4


@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr):
    pid = tl.program_id(0)  # a 1-D grid: one program per tile of c
    n_m = (M + BM - 1) // BM
    n_n = (N + BN - 1) // BN
    # >>> learner
    #> # TODO: map pid to (pid_m, pid_n) in groups of GROUP_M tile-rows: walk down GROUP_M rows of tiles, then
    #> # move one tile column right; the last group may have fewer than GROUP_M rows.
    #> pid_m = 0
    #> pid_n = 0
    per_group = GROUP_M * n_n  # programs in one group of GROUP_M tile-rows
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(n_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (pid % per_group) % group_m  # down the group's tile-rows first ...
    pid_n = (pid % per_group) // group_m  # ... then one tile column right
    # <<< learner
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype, a.device)
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    grouped_kernel[grid](a, b, c, m, n, k, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M)
    return c
