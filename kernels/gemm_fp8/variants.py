"""Register the gemm_fp8 variants (the torch baseline is registered with the contract)."""

from . import v1_triton  # noqa: F401
