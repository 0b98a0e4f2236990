"""Matrix transpose: out[j, i] = x[i, j]. No arithmetic at all: every cycle it costs is memory access pattern."""

from . import reference  # noqa: F401
