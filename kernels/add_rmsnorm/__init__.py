"""Fused residual add + RMSNorm: the pre-norm transformer block's ``h = x + r; y = rmsnorm(h) * w`` in one pass."""

from . import reference  # noqa: F401
from .reference import fusion_bytes  # noqa: F401
