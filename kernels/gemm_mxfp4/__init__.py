"""MXFP4 GEMM: OCP microscaling e2m1 values (two per byte) with one e8m0 scale per 32 values along K, bf16 out."""

from . import reference  # noqa: F401
