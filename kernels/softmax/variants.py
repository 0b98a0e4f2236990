"""Register the softmax variants; ``LADDER`` (not import order) is their teaching order.

The CuPy rung first (array code, then CuPy's kernel generators), then Numba, CUDA C and Triton.
"""

from workbench.registry import teaching_order

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
)

LADDER = (
    "torch_softmax", "cupy_unfused", "cupy_reduction", "cupy_fuse", "numba_three_pass", "numba_block_tree",
    "cuda_naive", "cuda_online", "cuda_warp", "cuda_block", "cuda_vec", "cuda_rows", "triton_fused", "triton_online",
    "triton_autotuned", "wrong_unwritten_rows", "wrong_zero_empty_rows", "wrong_no_max", "wrong_unguarded_warp_slots",
)
teaching_order("softmax", LADDER)
