"""FP8 (w8a8) MoE with DeepSeek-V3's block scales: e4m3 weights in 128x128 blocks, activations in 1x128 groups."""

from . import reference  # noqa: F401
