"""Register the attention variants in teaching order (the SDPA baseline is registered with the contract)."""

from . import v0_torch  # noqa: F401  (materialized attention and one SDPA baseline per backend)

from . import v1_numba_naive, v2_numba_flash, v3_cuda_flash_simt, v4_cuda_flash_wmma, v5_cuda_flash_mma  # noqa: E402,F401  # isort: skip
from . import v6_triton_fa2, wrong  # noqa: E402,F401
