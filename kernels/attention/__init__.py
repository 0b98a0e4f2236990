"""Attention with scaled_dot_product_attention semantics: the road to FlashAttention."""

from . import reference  # noqa: F401
