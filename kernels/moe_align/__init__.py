"""MoE token permutation: group the (token, expert) slots by expert, each group padded to a block multiple."""

from . import reference  # noqa: F401
