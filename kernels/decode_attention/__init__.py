"""Paged decode attention (FlashInfer NHD layout, GQA) and the split-KV log-sum-exp merge it is built on."""

from . import reference  # noqa: F401  (registers decode_attention and lse_merge)
