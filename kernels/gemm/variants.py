"""Register the gemm variants; ``LADDER`` (not import order) is their teaching order.

Cupy.matmul beside the torch baseline (cuBLAS from CuPy), then Numba, CUDA C, Triton and the CuTe DSL.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,
    v1_numba,
    v2_cuda_simt,
    v3_cuda_tensor_cores,
    v4_triton,
    v5_cute_simt,  # CuTe DSL: imports cutlass on first compile, not here
    v6_cute_wgmma_tma,
    wrong,
)

LADDER = (
    "torch_matmul", "cupy_matmul", "numba_naive", "numba_coalesced", "numba_smem", "numba_regblock", "cuda_naive",
    "cuda_coalesced", "cuda_smem", "cuda_1d_blocktile", "cuda_2d_blocktile", "cuda_vectorized", "cuda_nobank",
    "cuda_warptile", "cuda_wmma", "cuda_mma_sync", "cuda_wgmma_tma", "triton_tile", "triton_grouped",
    "triton_autotuned", "triton_persistent_tma", "cute_simt", "cute_wgmma_tma", "wrong_fp16_accumulator",
    "wrong_missing_syncthreads", "wrong_k_tail", "wrong_floor_grid",
)
teaching_order("gemm", LADDER)
