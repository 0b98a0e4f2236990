"""LayerNorm over the last dim: a row reduction with two statistics (mean, variance), Welford against two-pass.

``stats(x, eps)`` gives the fp32 (mean, rstd) per row that a fused forward saves for the backward.
"""

from . import reference  # noqa: F401  (registers layernorm)
from .reference import stats

__all__ = ["stats"]
