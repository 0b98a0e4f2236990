"""Softmax over the last dim: the memory-bound classic and the root of online softmax."""

from . import reference  # noqa: F401
