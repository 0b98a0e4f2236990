"""The attention backward pass: dQ, dK, dV from the saved forward (O and logsumexp) and the upstream dO."""

from . import reference  # noqa: F401
