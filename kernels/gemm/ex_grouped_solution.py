import torch
import triton
import triton.language as tl

from kernels.gemm.ex_common import grouped_gemm  # the tiled kernel that calls your helper, and its launch


@triton.jit
def tile_of(pid, n_m, n_n, GROUP_M: tl.constexpr):
    """Return (pid_m, pid_n), the tile of c that program pid computes, of n_m x n_n tiles."""
    # >>> learner
    #> # TODO: map pid to (pid_m, pid_n) in groups of GROUP_M tile-rows: walk down GROUP_M rows of tiles, then
    #> # move one tile column right; the last group may have fewer than GROUP_M rows.
    #> return 0, 0
    per_group = GROUP_M * n_n  # programs in one group of GROUP_M tile-rows
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(n_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (pid % per_group) % group_m  # down the group's tile-rows first ...
    pid_n = (pid % per_group) // group_m  # ... then one tile column right
    return pid_m, pid_n
    # <<< learner


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return grouped_gemm(tile_of, a, b)
