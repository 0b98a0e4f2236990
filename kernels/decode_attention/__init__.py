"""Paged decode attention (FlashInfer NHD layout, GQA) and the split-KV log-sum-exp merge it is built on."""

from . import lse_merge, reference  # noqa: F401
