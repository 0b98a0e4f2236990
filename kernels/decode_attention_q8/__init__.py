"""Decode attention over a quantized paged KV cache: int8 or fp8-e4m3 codes with per-token-per-head scales."""

from . import reference  # noqa: F401  (registers decode_attention_q8)
