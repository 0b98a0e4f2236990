"""The layernorm_bwd contract: the gradients of LayerNorm from what a fused forward saved.

``layernorm_bwd(dy[M,N], x[M,N], w[N], mean[M], rstd[M]) -> (dx[M,N], dw[N], db[N])``

- The forward is ``y = (x - mean) * rstd * w + b`` per row, ``mean`` and ``rstd = 1 / sqrt(var + eps)`` (biased
  variance) saved in float32 by the forward, as Triton's tutorial 05 saves them. The backward never recomputes
  them: eps lives inside the saved ``rstd`` (the inputs ``make`` builds use eps = 1e-5, torch's
  default).
- With ``xhat = (x - mean) * rstd`` and ``g = w * dy``:
  ``dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))`` (per row, means over the N columns),
  ``dw = sum_i dy * xhat`` and ``db = sum_i dy`` (sums over the M rows: one number per column).
- ``dy``, ``x`` and ``w`` share one dtype (float32, float16 or bfloat16); ``dx`` has x's dtype, and ``dw``,
  ``db`` have w's dtype, as ``torch.autograd`` gives a parameter's gradient in the parameter's dtype. Kernels
  accumulate dw and db in float32 and round once at the end.
- The float64 reference uses the saved mean and rstd (exactly as given), so it computes what a kernel fed them
  should compute.
- Input cases: ``random``; ``large`` (row means 100 to 110, spread 1, on rows of N >= 2: a backward that
  rebuilt the variance as E[x^2] - E[x]^2 in fp32 would lose it, and one that computes xhat in the fused form
  ``x * rstd - mean * rstd`` loses ~|mean| * rstd * 2^-24 to cancellation, where ``(x - mean) * rstd`` is exact
  up to one rounding). A row of one element has var = 0 and rstd = 1/sqrt(eps) = 316: the fused form's error
  is 316 times larger there, so the large case leaves N = 1 out; the exact xhat is 0 for it whatever the mean.
  (It also leaves out the check's N = 4097, for time: the interpreter is slow at long rows.)
"""

from __future__ import annotations

import torch

from workbench import MODE
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OP = "layernorm_bwd"
EPS = 1e-5  # the eps make() bakes into the saved rstd (torch.nn.functional.layer_norm's default)
LARGE_MEAN = 100.0


def validate(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor) -> dict:
    """Check the inputs of layernorm_bwd and return the shape {M, N}."""
    require_tensor(OP, "dy", dy, 2, DTYPES, "[M,N]")
    require_tensor(OP, "x", x, 2, DTYPES, "[M,N]")
    require_tensor(OP, "w", w, 1, DTYPES, "[N]")
    require_tensor(OP, "mean", mean, 1, (torch.float32,), "[M]")
    require_tensor(OP, "rstd", rstd, 1, (torch.float32,), "[M]")
    require_same_dtype(OP, dy=dy, x=x, w=w)
    m, n = x.shape
    require(OP, tuple(dy.shape) == (m, n), f"dy must have x's shape {tuple(x.shape)}, got {tuple(dy.shape)}")
    require(OP, w.shape[0] == n, f"w[N] must match x[M,N]'s N={n}, got {w.shape[0]}")
    for name, t in (("mean", mean), ("rstd", rstd)):
        require(OP, t.shape[0] == m, f"{name}[M] must match x[M,N]'s M={m}, got {t.shape[0]}")
    require(OP, n >= 1, f"a row needs at least one element (N >= 1), got x {tuple(x.shape)}")
    return {"M": m, "N": n}


def reference(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
              rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dx, dw, db) in float64 from the saved mean and rstd."""
    validate(dy, x, w, mean, rstd)
    dy64, r = dy.double(), rstd.double()[:, None]
    xhat = (x.double() - mean.double()[:, None]) * r
    g = dy64 * w.double()
    dx = r * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))
    return dx, (dy64 * xhat).sum(dim=0), dy64.sum(dim=0)


def stats(x: torch.Tensor, eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the (mean, rstd) a fused forward saves for ``x``: float32, from float64 statistics of each row."""
    x64 = x.double()
    mean = x64.mean(dim=1)
    var = (x64 - mean[:, None]).square().mean(dim=1)  # biased, as layer_norm
    return mean.float(), torch.rsqrt(var + eps).float()


def make(shape: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = shape["M"], shape["N"]
    cpu = torch.device("cpu")
    x = randn((m, n), torch.float32, g, cpu)
    if case == "large":
        x = x + LARGE_MEAN * (1.0 + 0.1 * torch.rand((m, 1), generator=g))  # row means 100..110, spread 1
    x = x.to(dtype)
    w = (1.0 + 0.1 * torch.randn((n,), generator=g)).to(dtype)
    dy = randn((m, n), dtype, g, cpu)
    mean, rstd = stats(x)  # what the forward saved, from the rounded x
    return tuple(t.to(device) for t in (dy, x, w, mean, rstd))


def flops(M: int, N: int) -> float:  # noqa: N803
    # Per element: xhat (2), g = w*dy (1), the two row sums (3), dx (4), dw += dy*xhat (2), db += dy (1).
    return 13.0 * M * N


def nbytes(M: int, N: int, dtype: torch.dtype = torch.float32) -> float:  # noqa: N803
    # Read dy and x, write dx ([M,N] each); read w, write dw and db ([N]); read mean and rstd (fp32, [M]).
    return (3 * M * N + 3 * N) * elem_size(dtype) + 8 * M


#: fp32 atol factor on rows of at most SHORT_ROW elements (see tolerance).
SHORT_ROW, SHORT_ROW_ATOL = 3, 100.0


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # dw and db sum M products in fp32 and round once. In fp32 the sum's own error shows: each product carries
    # xhat's rounding (~|mean| * rstd * 2^-24 in the fused form x * rstd - mean * rstd that torch's kernels use),
    # and M of them add up like a random walk, so atol grows as sqrt(M) past 32 rows.
    # Rows of 1-3 elements are ill-conditioned: their values often nearly agree, so rstd nears 1/sqrt(eps) = 316
    # (always, for N = 1), and xhat's rounding reaches dw multiplied by rstd and dx by rstd^2. torch's own fp32
    # backward, on 9000 random inputs with N = 1-3 and M = 1-70, was up to 5x past the long rows' atol (dx, N = 2)
    # and at most 0.38 of 100 times it; rows of 4 or more stayed under 0.1 of the plain atol.
    if dtype == torch.float32:
        a = 1e-4 * max(1.0, (shape["M"] / 32) ** 0.5)
        return (a * SHORT_ROW_ATOL if shape["N"] <= SHORT_ROW else a), 1e-4
    return {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


# Ragged N against the power-of-two row tile (1, 17, 1023, 1025, 4097), and M that leaves the last CTA of 32 rows
# (the Triton kernels' ROWS_PER_CTA) partial: 1 row, 33 = 32 + 1, 70 = 2 * 32 + 6. The long rows come with few of
# them: under the checker's sanitizers the Triton interpreter costs ~0.5 s per row of 4097. For the same reason
# the large case runs on N = 17 to 1025 only, and the op declares no wide_shape (65,536 elements would cost ~2.5 s
# per Triton variant; its kernels index with int64 row offsets).
_CPU_SHAPES = [{"M": 1, "N": 1}, {"M": 33, "N": 17}, {"M": 70, "N": 40}, {"M": 2, "N": 1023}, {"M": 2, "N": 1025},
               {"M": 1, "N": 4097}]

register_op(Op(
    name=OP,
    signature="layernorm_bwd(dy[M,N], x[M,N], w[N], mean[M] fp32, rstd[M] fp32) -> (dx[M,N], dw[N], db[N])",
    shape_keys=("M", "N"),
    **contract(globals()),
    check_shapes=_CPU_SHAPES,
    package="kernels.layernorm_bwd.variants",
    bench_shapes={"gpu": [{"M": 8192, "N": n} for n in (1024, 2048, 4096, 8192)],
                  "quick": [{"M": 8192, "N": 4096}], "cpu": [{"M": 64, "N": 256}]},
    size_key=lambda s: s["N"],
    cases=("random", "large"),
    case_shapes={"large": lambda s: 2 <= s["N"] <= 1025},
    outputs=("dx", "dw", "db"),
    dtype_of=lambda dy, *rest: dy.dtype,
    doc="Row-local dx (two row sums) plus a column reduction over all M rows for dw and db: atomics, locks or "
        "per-CTA partials.",
))


@register(OP, "torch_native_bwd", backend="torch",
          idea="Vendor baseline: aten.native_layer_norm_backward alone, fed the saved mean and rstd.")
def torch_native_bwd(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    if x.device.type == "cpu" and x.dtype != torch.float32:
        # torch's CPU kernel wants mean and rstd in x's dtype (fp16 rounds a mean near 100 to 1/16): give it
        # fp32 copies of dy, x and w instead, and round its results once.
        dx, dw, db = torch_native_bwd(dy.float(), x.float(), w.float(), mean, rstd)
        return dx.to(x.dtype), dw.to(w.dtype), db.to(w.dtype)
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(dy, x, [n], mean.view(m, 1), rstd.view(m, 1), w, w,
                                                           [True, True, True])
    return dx, dw, db


# cpu mode: float32 only. torch's CPU layer_norm backward in float16 misses the fp16 tolerance here (dx off by 0.21
# of 2.55 in the large case, measured), where its CUDA kernel accumulates in fp32.
@register(OP, "torch_autograd", backend="torch", dtypes=DTYPES if MODE == "gpu" else (torch.float32,),
          idea="Vendor baseline: F.layer_norm re-run under autograd (recomputes mean/rstd, eps=1e-5), then backward.")
def torch_autograd(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_, w_ = x.detach().requires_grad_(), w.detach().requires_grad_()
    b_ = torch.zeros_like(w).requires_grad_()
    with torch.enable_grad():
        y = torch.nn.functional.layer_norm(x_, (x.shape[1],), w_, b_, EPS)
        return torch.autograd.grad(y, (x_, w_, b_), dy)
