import torch

import workbench as wb
import workbench.cupy as cp

# >>> learner
#> # Complete the three TODO strings: a ReductionKernel that returns, for each row of x, the sum of its squares.
#> # cupy pastes them into the kernel it generates; print(sum_squares.cached_code) after a call to read it.
# <<< learner
sum_squares = cp.ReductionKernel(
    # >>> learner
    #> "T x",  # input: one element of x (T is x's dtype, float32 or float16)
    #> "float32 ss",  # output: one float per row
    #> "0",  # TODO 1 map_expr: what one element x contributes to the sum
    #> "a",  # TODO 2 reduce_expr: combine two partial sums a and b
    #> "ss = a",  # post_map_expr: store the reduced value a in the output
    #> "1",  # TODO 3 identity: the value a row's sum starts from
    "T x",
    "float32 ss",
    "(float)x * (float)x",  # map: the square, in float (300^2 = 9e4 does not fit fp16, whose max is 65504)
    "a + b",  # reduce: partial sums add
    "ss = a",
    "0",  # identity: the empty sum; every block's threads start from it, so it must change nothing
    # <<< learner
    "rmsnorm_sum_squares")

# >>> learner
#> # Given: y = x * rsqrt(ss / N + eps) * w, elementwise, with ss[:, None] and w[N] broadcast against x[M,N].
# <<< learner
scale = cp.ElementwiseKernel(
    "T x, float32 ss, T w, float32 inv_n, float32 eps", "T y",
    "y = (T)((float)x * rsqrtf(ss * inv_n + eps) * (float)w)",
    "rmsnorm_scale")


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    # >>> learner
    #> out = wb.empty_like(x)  # poisoned (NaN) under the checker: unwritten elements show up
    out = wb.empty_like(x)
    # <<< learner
    a, y = cp.from_torch(x), cp.from_torch(out)
    # >>> learner
    #> ss = sum_squares(a, axis=1)  # reduce along each row: shape [M]
    ss = sum_squares(a, axis=1)
    # <<< learner
    scale(a, ss[:, None], cp.from_torch(w), 1.0 / x.shape[1], eps, y)
    return cp.to_torch(y, x.dtype)
