"""INT8 GEMM (w8a8): int8 a and b, int32 accumulation, per-token and per-channel fp32 scales in the epilogue."""

from . import reference  # noqa: F401
