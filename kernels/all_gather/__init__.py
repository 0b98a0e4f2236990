"""all_gather: every rank gets every rank's piece, concatenated in rank order (contract in reference.py)."""

from . import reference  # noqa: F401
