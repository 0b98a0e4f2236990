"""Register the attention variants in teaching order (the SDPA baseline is registered with the contract)."""

from . import v0_torch  # noqa: F401  (materialized attention and one SDPA baseline per backend)
