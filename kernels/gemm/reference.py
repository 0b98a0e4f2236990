"""The gemm contract: ``gemm(a[M,K], b[K,N]) -> [M,N]`` in the inputs' dtype, accumulated in (at least) fp32.

NaN and +-Inf inputs give what IEEE arithmetic gives (a NaN row, +-inf, inf - inf = NaN): the ``special`` input
case, checked as a probe, holds them and a row of huge values.
"""

from __future__ import annotations

import math

import torch

from workbench import empty
from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def cubes(*sizes: int) -> list[dict]:
    """Return the shapes M = N = K = n for each n: the GEMM family's benchmark sizes."""
    return [{"M": n, "N": n, "K": n} for n in sizes]


def cube_edge(s: dict) -> int:
    """Return the edge of the cube with a shape's M*N*K: one size axis for a GEMM's plots."""
    return round(math.pow(s["M"] * s["N"] * s["K"], 1 / 3))


def validate(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Check the inputs of gemm and return the shape {M, N, K}."""
    require_tensor("gemm", "a", a, 2, DTYPES, "[M,K]")
    require_tensor("gemm", "b", b, 2, DTYPES, "[K,N]")
    require_same_dtype("gemm", a=a, b=b)
    require("gemm", a.shape[1] == b.shape[0],
            f"inner sizes must match: a[M,K] is {tuple(a.shape)} and b[K,N] is {tuple(b.shape)}")
    return {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Multiply in float64."""
    validate(a, b)
    return a.double() @ b.double()


def output(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, int, int, int]:
    """Return (c, M, N, K): the empty c [M, N] of a's dtype a kernel fills (poisoned when checked) and the sizes."""
    (m, k), n = a.shape, b.shape[1]
    return empty((m, n), a.dtype, a.device), m, n, k


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    a, b = randn((sizes["M"], sizes["K"]), dtype, g, device), randn((sizes["K"], sizes["N"]), dtype, g, device)
    if case == "special" and a.numel() and b.numel():
        put_gemm_specials(a, b)
    return a, b


def put_gemm_specials(a: torch.Tensor, b: torch.Tensor) -> None:
    """Write the ``special`` case into a[M,K] and b[K,N] in place: NaN, +-Inf and huge values, as IEEE defines them.

    a[0, 0] = NaN (row 0 of c is NaN); a[1, K // 2] = +inf (row 1 is +-inf); b[K - 1, N - 1] = -inf (column N - 1
    is -+inf, and NaN where it meets row 1's inf of the other sign); row 2 of a is 0 but for a huge a[2, 0] (2^60,
    2^12 in fp16): c[2, :] = a[2, 0] * b[0, :] exactly, large but finite, and a kernel that squeezes it through
    fp16 overflows.
    """
    m, k = a.shape
    n = b.shape[1]
    a[0, 0] = float("nan")
    if m > 1:
        a[1, k // 2] = float("inf")
    if n > 1:
        b[k - 1, n - 1] = float("-inf")
    if m > 2:
        a[2] = 0.0
        a[2, 0] = 2.0 ** (12 if a.dtype == torch.float16 else 60)


def tma_supports(shape: dict) -> str | None:
    """Return why a TMA kernel cannot take ``shape`` (16-bit rows of a and b need 16-byte strides), or None."""
    if shape["K"] % 8 or shape["N"] % 8:
        return ("TMA needs 16-byte-aligned row strides: K and N must be multiples of 8 for 16-bit inputs, "
                f"got K={shape['K']}, N={shape['N']}")
    return None


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # A dot product of K N(0,1) terms has magnitude ~sqrt(K); its rounding error grows like eps*sqrt(K)*that.
    k = max(1, shape.get("K", 1))
    eps = {torch.float32: 1.2e-7, torch.float16: 9.8e-4, torch.bfloat16: 7.8e-3}[dtype]
    return 8 * eps * k, 4 * eps


OP = register_op(Op(
    name="gemm",
    signature="gemm(a[M,K], b[K,N]) -> [M,N]",
    shape_keys=("M", "N", "K"),
    **contract(globals()),
    flops=lambda M, N, K: 2 * M * N * K,
    bytes=lambda M, N, K, dtype=torch.float32: (M * K + K * N + M * N) * elem_size(dtype),
    check_shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 64, "N": 64, "K": 64},
                  {"M": 127, "N": 65, "K": 129}],
    package="kernels.gemm.variants",
    bench_shapes={"gpu": cubes(512, 1024, 2048, 4096, 8192), "quick": cubes(1024, 4096), "cpu": cubes(64)},
    size_key=cube_edge,
    specials=("special",),
    doc="2MNK FLOPs over (MK+KN+MN) elements: intensity grows with size, so big GEMMs are compute-bound.",
))


@register("gemm", "torch_matmul", backend="torch", idea="Vendor baseline: torch.matmul (cuBLAS on a GPU).")
def torch_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)
