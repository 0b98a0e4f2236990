"""The add_rmsnorm contract: ``add_rmsnorm(x[M,N], residual[M,N], w[N], eps=1e-6) -> (y, new_residual)``.

``new_residual = x + residual`` in the input dtype, rounded as torch rounds ``x + residual`` at that dtype (a
transformer keeps the residual stream in bf16 and adds to it in bf16); ``y = new_residual / sqrt(mean(new_residual^2)
+ eps) * w`` with the statistics in fp32, the output in the input dtype. y is computed from the *rounded* sum, as
the unfused pair (``torch.add`` then ``F.rms_norm``) and vLLM's ``fused_add_rms_norm`` do. A NaN in a row makes that
row of y NaN (and the NaN's element of new_residual). Input cases: ``random``; ``large`` (|x|, |residual| ~ 300:
fp16 squares overflow); ``nan`` (NaNs in x where rmsnorm's case puts them).

Why fuse: two kernels read x and r and write s, then read s and w and write y: 5MN + N elements. One kernel reads
x, r, w and writes s and y: 4MN + N. :func:`fusion_bytes` counts both.
"""

from __future__ import annotations

import torch

from kernels.softmax.reference import put_nans
from workbench.contracts import elem_size, randn, require, require_tensor
from workbench.registry import Op, as_dtype, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EPS = 1e-6


def validate(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> dict:
    """Check the inputs of add_rmsnorm and return the shape {M, N}."""
    require_tensor("add_rmsnorm", "x", x, 2, DTYPES, "[M,N]")
    require_tensor("add_rmsnorm", "residual", residual, 2, DTYPES, "[M,N]")
    require_tensor("add_rmsnorm", "w", w, 1, DTYPES, "[N]")
    require("add_rmsnorm", residual.shape == x.shape,
            f"residual must have x's shape [M,N] = {list(x.shape)}, got {list(residual.shape)}")
    require("add_rmsnorm", residual.dtype == x.dtype == w.dtype,
            f"x, residual and w must share one dtype, got {x.dtype}, {residual.dtype}, {w.dtype}")
    require("add_rmsnorm", w.shape[0] == x.shape[1], f"w[N] must match x[M,N]'s N={x.shape[1]}, got {w.shape[0]}")
    require("add_rmsnorm", isinstance(eps, (int, float)) and eps > 0, f"eps must be a positive number, got {eps!r}")
    return {"M": x.shape[0], "N": x.shape[1]}


def reference(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
              eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Add in the input dtype (as torch rounds it), then RMSNorm the rounded sum in float64; return (y, sum)."""
    validate(x, residual, w, eps)
    s = (x + residual).double()  # one rounding to x's dtype, then exact from here on
    y = s * torch.rsqrt(s.square().mean(dim=-1, keepdim=True) + eps) * w.double()
    return y, s


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = sizes["M"], sizes["N"]
    scale = 300.0 if case == "large" else 1.0  # "large": fp16 squares (9e4) overflow unless accumulated in fp32
    cpu = torch.device("cpu")
    x, r = randn((m, n), torch.float32, g, cpu, scale=scale), randn((m, n), torch.float32, g, cpu, scale=scale)
    w = (1.0 + 0.1 * torch.randn((n,), generator=g)).to(dtype).to(device)
    if case == "nan":
        put_nans(x)
    return x.to(dtype).to(device), r.to(dtype).to(device), w


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'normalizer' when new_residual is right and each row of y is off by one factor of its own."""
    from workbench.checker import close_to

    (y, s), (y_ref, s_ref) = outs, refs
    if not close_to(s, s_ref, atol, rtol):
        return None
    rows = torch.isfinite(y_ref).all(dim=1) & (y_ref.abs() > 1e-6).any(dim=1)  # NaN rows and all-zero rows aside
    if not rows.any():
        return None
    big = y_ref.abs() > 1e-6
    ratio = torch.where(big, y / torch.where(big, y_ref, 1.0), torch.nan)[rows]
    factor = ratio.nanmedian(dim=1).values  # one factor per row
    if not close_to(y[rows], y_ref[rows] * factor[:, None], atol, rtol):
        return None
    return "normalizer" if bool(((factor - 1).abs() > 4 * rtol).any()) else None


def fusion_bytes(M: int, N: int, dtype: torch.dtype | str = torch.bfloat16) -> dict[str, int]:  # noqa: N803
    """Return the DRAM bytes of add + RMSNorm as two kernels and as one, and what fusing saves.

    Two kernels: the add reads x and r and writes s (3MN elements), the RMSNorm reads s and w and writes y
    (2MN + N). Fused: read x, r and w, write s and y (4MN + N). The saving is the re-read of s, MN elements: 20% of
    the two kernels' traffic at large M (the new residual must still be written: the next block reads it).
    """
    e = elem_size(as_dtype(dtype))
    two = (3 * M * N + 2 * M * N + N) * e
    fused = (4 * M * N + N) * e
    return {"two_kernels": two, "fused": fused, "saved": two - fused}


OP = register_op(Op(
    name="add_rmsnorm",
    signature="add_rmsnorm(x[M,N], residual[M,N], w[N], eps=1e-6) -> (y[M,N], new_residual[M,N])",
    shape_keys=("M", "N"),
    **contract(globals()),
    flops=lambda M, N: 5 * M * N,  # add, square, sum, scale by 1/rms, scale by w
    bytes=lambda M, N, dtype=torch.float32: fusion_bytes(M, N, dtype)["fused"],  # read x, r, w; write y, s
    # The ragged N (1, 17, 1023, 1025, 4097), and N = 264 (a multiple of 8, not of 32).
    check_shapes=[{"M": 1, "N": 1}, {"M": 5, "N": 17}, {"M": 3, "N": 1023}, {"M": 2, "N": 1025},
                  {"M": 8, "N": 264}, {"M": 2, "N": 4097}],
    tolerance=lambda dtype, shape: {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3),
                                    torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype],
    package="kernels.add_rmsnorm.variants",
    bench_shapes={"gpu": [{"M": 2**26 // n, "N": n} for n in (1024, 4096, 16384)] + [{"M": 8192, "N": 4096}],
                  "quick": [{"M": 8192, "N": 4096}], "cpu": [{"M": 16, "N": 1024}]},
    size_key=lambda s: s["N"],
    cases=("random", "large", "nan"),
    call_kwargs=("eps",),
    flags={"eps": (EPS, 0.5)},
    specials=("large", "nan"),
    wide_shape={"M": 33, "N": 2000},
    outputs=("y", "new_residual"),
    doc="Residual add fused into RMSNorm; 4MN + N elements of traffic against 5MN + N as two kernels: "
        "memory-bound.",
))


@register("add_rmsnorm", "torch_add_rms_norm", backend="torch",
          idea="Unfused baseline: torch.add, then F.rms_norm: two kernels, the sum written and read back.")
def torch_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                       eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    s = x + residual
    return torch.nn.functional.rms_norm(s, (s.shape[-1],), w, eps), s
