"""GEMM: c = a @ b, the backbone of every kernel interview."""

from . import reference  # noqa: F401
