"""Paged decode attention (FlashInfer NHD layout, GQA) and the split-KV log-sum-exp merge it is built on.

``decode_attention_partial`` gives the float64 split-KV partials (o, lse) a split kernel computes before its merge.
"""

from . import reference  # noqa: F401  (registers decode_attention and lse_merge)
from .reference import decode_attention_partial

__all__ = ["decode_attention_partial"]
