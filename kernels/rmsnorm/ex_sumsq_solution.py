import torch

import workbench as wb
import workbench.cupy as cp

sum_squares = cp.ReductionKernel(
    "T x",
    "float32 ss",
    "(float)x * (float)x",  # map: the square, in float (300^2 = 9e4 does not fit fp16, whose max is 65504)
    "a + b",  # reduce: partial sums add
    "ss = a",
    "0",  # identity: the empty sum; every block's threads start from it, so it must change nothing
    "rmsnorm_sum_squares")

scale = cp.ElementwiseKernel(
    "T x, float32 ss, T w, float32 inv_n, float32 eps", "T y",
    "y = (T)((float)x * rsqrtf(ss * inv_n + eps) * (float)w)",
    "rmsnorm_scale")


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    out = wb.empty_like(x)
    a, y = cp.from_torch(x), cp.from_torch(out)
    ss = sum_squares(a, axis=1)
    scale(a, ss[:, None], cp.from_torch(w), 1.0 / x.shape[1], eps, y)
    return cp.to_torch(y, x.dtype)
