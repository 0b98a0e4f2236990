"""Fused Mixture-of-Experts: routing, permutation, grouped GEMM with SwiGLU, weighted combine."""

from . import reference  # noqa: F401
