"""The layernorm contract: ``layernorm(x[M,N], w[N], b[N], eps=1e-5) -> [M,N]``, ``F.layer_norm`` semantics.

y = (x - mean) / sqrt(var + eps) * w + b per row, with the biased variance var = mean((x - mean)^2) (divide by N,
not N - 1) and eps inside the square root. Statistics in fp32, output in x's dtype. A NaN (or an inf) in a row makes
that row NaN, as in torch.

Input cases: ``random``; ``large_mean`` (rows 100 + N(0,1): E[x^2] is 1e4, so the one-pass variance
E[x^2] - E[x]^2 in fp32 keeps about three significant digits; ``kernels.layernorm.precision`` follows the error
up to means of 1e5, where it is larger than the variance itself); ``constant`` (every other row one dyadic value, so
an fp32 sum of it is exact and the variance is exactly 0: eps alone keeps 1/sqrt finite and y = b there); ``nan``
(softmax's NaN rows). The flag ``eps`` runs at 1e-5 and at 0.5 (where eps outside the square root is far off).

The fp32 tolerance is 5e-5: with fp32 statistics the error of y is at least the rounding of the row's mean,
|mean| * 2^-24 or more, over its std; on the ``large_mean`` rows (|mean| / std = 100) two-pass sums measured 1.4e-5
and torch 1.0e-5 (N = 17, 1023, 4097), the one-pass formula about 4e-3. A row of mean 1e4 and std 1 would be off
by about 1e-3 in any fp32 kernel, so the case keeps the ratio at 100.
"""

from __future__ import annotations

import torch

from kernels.softmax.reference import put_nans
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EPS = 1e-5
LARGE_MEAN = 100.0  # the large_mean rows: 100 + N(0,1)


def validate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> dict:
    """Check the inputs of layernorm and return the shape {M, N}."""
    require_tensor("layernorm", "x", x, 2, DTYPES, "[M,N]")
    require_tensor("layernorm", "w", w, 1, DTYPES, "[N]")
    require_tensor("layernorm", "b", b, 1, DTYPES, "[N]")
    require_same_dtype("layernorm", x=x, w=w, b=b)
    n = x.shape[1]
    require("layernorm", w.shape[0] == n, f"w[N] must match x[M,N]'s N={n}, got {w.shape[0]}")
    require("layernorm", b.shape[0] == n, f"b[N] must match x[M,N]'s N={n}, got {b.shape[0]}")
    require("layernorm", isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps > 0,
            f"eps must be a positive number, got {eps!r}")
    return {"M": x.shape[0], "N": n}


def _moments(xd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return each row's mean and biased variance of a float64 [M,N] tensor, keepdim (two passes)."""
    mean = xd.mean(dim=-1, keepdim=True)
    return mean, (xd - mean).square().mean(dim=-1, keepdim=True)


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Normalise each row to zero mean and unit (biased) variance in float64, then scale by w and shift by b."""
    validate(x, w, b, eps)
    xd = x.double()
    mean, var = _moments(xd)
    return (xd - mean) * torch.rsqrt(var + eps) * w.double() + b.double()


def stats(x: torch.Tensor, eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Return each row's (mean[M], rstd[M]) in fp32, computed in float64: what a fused forward saves for backward.

    rstd = 1 / sqrt(var + eps) with the biased variance: the mean and rstd ``layernorm_bwd(dy, x, w, mean, rstd)``
    takes.
    """
    require_tensor("layernorm", "x", x, 2, DTYPES, "[M,N]")
    require("layernorm", isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps > 0,
            f"eps must be a positive number, got {eps!r}")
    mean, var = _moments(x.double())
    return mean.squeeze(-1).float(), torch.rsqrt(var + eps).squeeze(-1).float()


def _constant_rows(x: torch.Tensor) -> None:
    """Make every other row (0, 2, ...) of x one dyadic value in place: exact sums, a variance of exactly 0."""
    for i in range(0, x.shape[0], 2):
        x[i] = 0.375 * (i % 5 - 2)  # multiples of 1/8 up to 0.75: any N here sums exactly in fp32


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = sizes["M"], sizes["N"]
    x = randn((m, n), torch.float32, g, torch.device("cpu"))
    w = 1.0 + 0.1 * torch.randn((n,), generator=g)
    b = 0.1 * torch.randn((n,), generator=g)
    if case == "large_mean":
        x = LARGE_MEAN + x
    elif case == "constant":
        _constant_rows(x)
    elif case == "nan":
        put_nans(x)
    return tuple(t.to(dtype).to(device) for t in (x, w, b))


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'scale' when one factor c != 1 maps the normalised part of the reference, y - b, onto the output's.

    That is a wrong variance used the same way in every row: N - 1 for N (c = sqrt(N / (N - 1))), or a std in
    place of the variance. Rows where either side is not finite are left aside (a NaN row is another mistake).
    """
    out, ref, b = outs[0], refs[0], inputs[2].double()
    rows = torch.isfinite(out).all(dim=1) & torch.isfinite(ref).all(dim=1)
    zo, zr = out[rows] - b, ref[rows] - b
    if zr.numel() == 0 or float(zr.square().sum()) == 0.0:
        return None
    c = float((zo * zr).sum() / zr.square().sum())  # least squares: zo ~ c zr
    fits = bool(((zo - c * zr).abs() <= atol + rtol * ref[rows].abs()).all())
    return "scale" if fits and abs(c - 1.0) > rtol else None


def nbytes(M: int, N: int, dtype: torch.dtype = torch.float32) -> float:
    """Return the minimum DRAM bytes: read x, w and b, write y."""
    return (2 * M * N + 2 * N) * elem_size(dtype)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    """Return (atol, rtol): fp32 allows for the rounding of an fp32 mean on rows with |mean| / std = 100."""
    return {torch.float32: (5e-5, 5e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


OP = register_op(Op(
    name="layernorm",
    signature="layernorm(x[M,N], w[N], b[N], eps=1e-5) -> [M,N]",
    shape_keys=("M", "N"),
    **contract(globals()),
    flops=lambda M, N: 7 * M * N,  # sum, subtract, square, sum, scale by rstd, by w, add b
    # Ragged N (1, 17, 1023, 1025, 4097) with few rows: the CPU engine and the interpreter run them in seconds.
    check_shapes=[{"M": 1, "N": 1}, {"M": 17, "N": 17}, {"M": 4, "N": 1023}, {"M": 3, "N": 1025},
                  {"M": 2, "N": 4097}],
    package="kernels.layernorm.variants",
    bench_shapes={"gpu": [{"M": 2**26 // n, "N": n} for n in (1024, 4096, 16384)] + [{"M": 8192, "N": 4096}],
                  "quick": [{"M": 8192, "N": 4096}], "cpu": [{"M": 16, "N": 1024}]},
    size_key=lambda s: s["N"],
    cases=("random", "large_mean", "constant", "nan"),
    call_kwargs=("eps",),
    flags={"eps": (EPS, 0.5)},
    specials=("large_mean", "constant", "nan"),
    wide_shape={"M": 33, "N": 2000},
    doc="Row LayerNorm; two statistics per row (mean, variance) and ~7 FLOPs per element: memory-bound.",
))


@register("layernorm", "torch_layer_norm", backend="torch",
          idea="Vendor baseline: torch.nn.functional.layer_norm over the last dim.")
def torch_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)
