"""Ring attention: attention over a sequence sharded across ranks, K/V blocks passed around a ring."""

from . import reference  # noqa: F401
