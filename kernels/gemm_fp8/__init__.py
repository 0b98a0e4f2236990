"""FP8 GEMM with per-tensor scales: c = scale_a * scale_b * (a @ bt.T), e4m3 inputs, fp32 accumulation, bf16 out."""

from . import reference  # noqa: F401
