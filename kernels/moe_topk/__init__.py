"""MoE routing: softmax over the router logits, then each token's top-k experts and their weights."""

from . import reference  # noqa: F401
