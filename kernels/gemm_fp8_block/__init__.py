"""FP8 GEMM with DeepSeek-V3 block scales: a in 1x128 groups, b in 128x128 blocks, scaled per K group, bf16 out."""

from . import reference  # noqa: F401
