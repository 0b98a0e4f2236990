"""RMSNorm over the last dim: softmax's row-reduction pattern with a sum of squares instead of (max, sum)."""

from . import reference  # noqa: F401
