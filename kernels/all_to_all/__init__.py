"""all_to_all: rank r sends block j of its rows to rank j, with uneven splits (contract in reference.py)."""

from . import reference  # noqa: F401
