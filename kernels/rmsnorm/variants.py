"""Register the rmsnorm variants in teaching order (the torch baseline is registered with the contract).

The CuPy rung comes first (array code, then a ReductionKernel), then Triton and CUDA C.
"""

from . import (  # noqa: F401
    v0_cupy,
    v1_triton_fused,
    v2_cuda_vec,
    wrong,  # wrong_mean_over_rows: divides a row's sum of squares by M instead of N
)
