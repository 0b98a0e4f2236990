"""Register the softmax variants in teaching order (the torch baseline is registered with the contract).

The CuPy rung comes first (array code, then CuPy's kernel generators), then Numba, CUDA C and Triton.
"""

from . import (  # noqa: F401
    v0_cupy,
    v1_numba_three_pass,
    v2_numba_block_tree,
    v3_cuda_naive,
    v4_cuda_online,
    v5_cuda_warp,
    v6_cuda_block,
    v7_cuda_vec,
    v8_cuda_rows,
    v9_triton_fused,
    v10_triton_online,
    v11_triton_autotuned,
    wrong,
    wrong_more,
)
