"""all_reduce: every rank ends with the sum of every rank's vector (contract in reference.py)."""

from . import reference  # noqa: F401
