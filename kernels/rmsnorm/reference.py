"""The rmsnorm contract: ``rmsnorm(x[M,N], w[N], eps=1e-6) -> [M,N]``, y = x / sqrt(mean(x^2) + eps) * w.

The mean of squares accumulates in fp32 (fp16 squares overflow past |x| = 256), the output has x's dtype. A NaN
in a row makes that row NaN, as in torch. Input cases: ``random``; ``large`` (|x| ~ 300: fp16 squares overflow);
``nan`` (NaNs as the first element of row 0, at column 5 of row 1, the last of row 2, among -inf in row 3).
"""

from __future__ import annotations

import torch

from kernels.softmax.reference import put_nans
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EPS = 1e-6


def validate(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> dict:
    """Check the inputs of rmsnorm and return the shape {M, N}."""
    require_tensor("rmsnorm", "x", x, 2, DTYPES, "[M,N]")
    require_tensor("rmsnorm", "w", w, 1, DTYPES, "[N]")
    require_same_dtype("rmsnorm", x=x, w=w)
    require("rmsnorm", w.shape[0] == x.shape[1], f"w[N] must match x[M,N]'s N={x.shape[1]}, got {w.shape[0]}")
    require("rmsnorm", isinstance(eps, (int, float)) and eps > 0, f"eps must be a positive number, got {eps!r}")
    return {"M": x.shape[0], "N": x.shape[1]}


def reference(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Normalise each row by its root mean square in float64, then scale by w."""
    validate(x, w, eps)
    xd = x.double()
    return xd * torch.rsqrt(xd.square().mean(dim=-1, keepdim=True) + eps) * w.double()


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = sizes["M"], sizes["N"]
    scale = 300.0 if case == "large" else 1.0  # "large": fp16 squares (9e4) overflow unless accumulated in fp32
    x = randn((m, n), torch.float32, g, torch.device("cpu"), scale=scale)
    w = (1.0 + 0.1 * torch.randn((n,), generator=g)).to(dtype).to(device)
    if case == "nan":
        put_nans(x)
    return x.to(dtype).to(device), w


OP = register_op(Op(
    name="rmsnorm",
    signature="rmsnorm(x[M,N], w[N], eps=1e-6) -> [M,N]",
    shape_keys=("M", "N"),
    **contract(globals()),
    flops=lambda M, N: 4 * M * N,  # square, add, scale by 1/rms, scale by w
    bytes=lambda M, N, dtype=torch.float32: (2 * M * N + N) * elem_size(dtype),  # read x and w, write y
    # Ragged sizes for the tails, and M = 8, N = 264 (multiples of 4 and 8, not of 32) for the vectorised paths.
    check_shapes=[{"M": 1, "N": 1}, {"M": 17, "N": 33}, {"M": 4, "N": 1023}, {"M": 3, "N": 1030}, {"M": 8, "N": 264}],
    tolerance=lambda dtype, shape: {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3),
                                    torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype],
    package="kernels.rmsnorm.variants",
    bench_shapes={"gpu": [{"M": 2**26 // n, "N": n} for n in (1024, 4096, 16384, 65536)],
                  "quick": [{"M": 4096, "N": 4096}], "cpu": [{"M": 16, "N": 1024}]},
    size_key=lambda s: s["N"],
    cases=("random", "large", "nan"),
    call_kwargs=("eps",),
    flags={"eps": (EPS, 0.5)},
    specials=("large", "nan"),
    wide_shape={"M": 33, "N": 2000},
    doc="Row RMSNorm; ~4 FLOPs per element against 2 elements of traffic: memory-bound, like softmax.",
))


@register("rmsnorm", "torch_rms_norm", backend="torch",
          idea="Vendor baseline: torch.nn.functional.rms_norm over the last dim.")
def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)
