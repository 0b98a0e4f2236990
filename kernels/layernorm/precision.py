"""How exact is a row's variance in fp32? One-pass, two-pass and Welford against float64, as the row mean grows.

:func:`variance_error` emulates, in numpy float32, what a warp-per-row kernel does: 32 lanes each fold the elements
l, l + 32, ... of a row in order, then a butterfly tree of five steps combines the 32 partials. The three methods:

* ``one_pass``: the lanes sum x and x^2, the tree adds the sums, var = E[x^2] - E[x]^2. Both terms are about mean^2,
  so their difference keeps only the digits that mean^2 leaves over: the error grows like mean^2 * 2^-24. With std 1
  it is about 3e-3 at mean 100 and larger than the variance itself by mean ~3000, where it often comes out negative
  (and rstd NaN).
* ``two_pass``: the lanes sum x (the tree gives the mean), then sum (x - mean)^2: every term is small, so the error
  stays near var * 2^-24 until the rounding of the mean, delta, shows as delta^2 (1e-6 at mean 1e4).
* ``welford``: each lane keeps (count, mean, M2) with Welford's update and the tree merges the states with Chan's
  formula (as cu/welford.cuh does): one read of x. Its running mean is rounded at every step and the M2 terms
  (x - mean) inherit that rounding, so its error grows like mean * 2^-24: 2e-4 at mean 1e4, between the two others.

The result is plain data a notebook can plot (``errors[method]`` against ``means`` on log axes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from workbench.contracts import require

METHODS = ("one_pass", "two_pass", "welford")
LANES = 32
F32 = np.float32


def _tree(parts: np.ndarray, combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Combine [rows, 32] partials as a butterfly does (lanes 16, 8, 4, 2, 1 apart): return [rows]."""
    while parts.shape[-1] > 1:
        half = parts.shape[-1] // 2
        parts = combine(parts[..., :half], parts[..., half:])
    return parts[..., 0]


def _lanes(x: np.ndarray) -> np.ndarray:
    """Return x[rows, N] as [rows, steps, 32] (lane l holds l, l + 32, ...), padded with NaN past N."""
    rows, n = x.shape
    steps = -(-n // LANES)
    padded = np.full((rows, steps * LANES), np.nan, dtype=F32)
    padded[:, :n] = x
    return padded.reshape(rows, steps, LANES)


def one_pass(x: np.ndarray) -> np.ndarray:
    """Return each row's variance E[x^2] - E[x]^2 in float32 (lane sums of x and x^2, then a tree)."""
    lx = _lanes(x)
    s = np.zeros((x.shape[0], LANES), F32)
    ss = np.zeros((x.shape[0], LANES), F32)
    for k in range(lx.shape[1]):
        v = np.nan_to_num(lx[:, k], nan=0.0)  # padding adds nothing
        s += v
        ss += v * v
    n = F32(x.shape[1])
    mean = _tree(s, np.add) / n
    return _tree(ss, np.add) / n - mean * mean


def two_pass(x: np.ndarray) -> np.ndarray:
    """Return each row's variance mean((x - mean)^2) in float32, the mean from a first pass."""
    lx = _lanes(x)
    n = F32(x.shape[1])
    s = np.zeros((x.shape[0], LANES), F32)
    for k in range(lx.shape[1]):
        s += np.nan_to_num(lx[:, k], nan=0.0)
    mean = (_tree(s, np.add) / n)[:, None]
    ss = np.zeros((x.shape[0], LANES), F32)
    for k in range(lx.shape[1]):
        d = np.where(np.isnan(lx[:, k]), F32(0), lx[:, k] - mean)
        ss += d * d
    return _tree(ss, np.add) / n


def _merge(a: tuple, b: tuple) -> tuple:
    """Chan's merge of Welford states (n, mean, M2), elementwise over float32 arrays."""
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    fb = np.divide(nb, n, out=np.zeros_like(n), where=n > 0)
    delta = mb - ma
    return n, ma + delta * fb, m2a + m2b + delta * delta * na * fb


def welford(x: np.ndarray) -> np.ndarray:
    """Return each row's variance M2 / N in float32: per-lane Welford updates, then a tree of merges."""
    lx = _lanes(x)
    shape = (x.shape[0], LANES)
    n, mean, m2 = np.zeros(shape, F32), np.zeros(shape, F32), np.zeros(shape, F32)
    for k in range(lx.shape[1]):
        v = lx[:, k]
        live = ~np.isnan(v)
        n1 = np.where(live, n + F32(1), n)
        delta = np.where(live, v - mean, F32(0))
        mean1 = mean + np.divide(delta, n1, out=np.zeros_like(delta), where=n1 > 0)
        m2 = m2 + np.where(live, delta * (v - mean1), F32(0))
        n, mean = n1, mean1
    parts = (n, mean, m2)
    while parts[0].shape[-1] > 1:
        half = parts[0].shape[-1] // 2
        parts = _merge(tuple(p[..., :half] for p in parts), tuple(p[..., half:] for p in parts))
    return parts[2][..., 0] / F32(x.shape[1])


def variance_error(means: Sequence[float] = tuple(10.0 ** (k / 2) for k in range(11)), n: int = 4096,
                   rows: int = 64, eps: float = 1e-5, seed: int = 0) -> dict:
    """Return the largest errors of each method's fp32 variance and rstd against float64, per row mean.

    Rows are ``mean + N(0, 1)`` rounded to float32 (the float64 truth is computed from those same float32 values).
    Returns ``{"means": [...], "n", "rows", "eps", "var_error": {method: [...]}, "rstd_error": {method: [...]}}``,
    each list aligned with ``means``: the max over rows of |var - var64| and |rstd - rstd64| with rstd =
    1 / sqrt(var + eps). A NaN (a negative one-pass variance under the square root) counts as an infinite error.
    """
    require("layernorm", n >= 1 and rows >= 1, f"variance_error needs n >= 1 and rows >= 1, got n={n}, rows={rows}")
    require("layernorm", eps > 0, f"eps must be positive, got {eps!r}")
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((rows, n))
    out: dict = {"means": [float(m) for m in means], "n": n, "rows": rows, "eps": eps,
                 "var_error": {k: [] for k in METHODS}, "rstd_error": {k: [] for k in METHODS}}
    fns = {"one_pass": one_pass, "two_pass": two_pass, "welford": welford}
    for m in means:
        x = (float(m) + noise).astype(F32)
        xd = x.astype(np.float64)
        var64 = xd.var(axis=1)
        rstd64 = 1.0 / np.sqrt(var64 + eps)
        for name, fn in fns.items():
            var = fn(x).astype(np.float64)
            with np.errstate(invalid="ignore"):
                rstd = 1.0 / np.sqrt(var + eps)
            out["var_error"][name].append(float(np.nan_to_num(np.abs(var - var64), nan=np.inf).max()))
            out["rstd_error"][name].append(float(np.nan_to_num(np.abs(rstd - rstd64), nan=np.inf).max()))
    return out
