"""Tensor-parallel MLP: column-parallel up projection, GELU, row-parallel down projection, one all-reduce."""

from . import reference  # noqa: F401
