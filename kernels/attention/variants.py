"""Register the attention variants in teaching order (the SDPA baseline is registered with the contract)."""

from . import (  # noqa: F401
    v0_cupy,  # CuPy array code: S and P materialised, the memory picture the notebook starts from
    v0_torch,  # materialized attention and one SDPA baseline per backend
    v1_numba_naive,
    v2_numba_flash,
    v3_cuda_flash_simt,
    v4_cuda_flash_wmma,
    v5_cuda_flash_mma,
    v6_triton_fa2,
    wrong,
)
