"""Vector add, the tour's first kernel: out = x + y."""

from . import reference  # noqa: F401
