"""The transpose contract: ``transpose(x[M,N]) -> [N,M]``, out[j, i] = x[i, j], row-major in and out.

It moves bits and computes nothing, so every dtype must come back bit-exact (NaN payloads and -0.0 included) and
the op does 0 FLOPs: its speed is how it touches memory. One of the two sides is always read or written along a
column, 4*M bytes apart between neighbours (float32): done naively, each warp's 32 lanes land in 32 different
32-byte sectors. Staging a tile in shared memory lets both sides go row by row.
"""

from __future__ import annotations

import torch

from workbench.contracts import elem_size, put_specials, randn, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(x: torch.Tensor) -> dict:
    """Check the input of transpose and return the shape {M, N}."""
    require_tensor("transpose", "x", x, 2, DTYPES, "[M,N]")
    return {"M": x.shape[0], "N": x.shape[1]}


def reference(x: torch.Tensor) -> torch.Tensor:
    """Return x transposed, in float64 (exact for every input dtype), row-major."""
    validate(x)
    return x.double().t().contiguous()


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = randn((sizes["M"], sizes["N"]), dtype, g, device)
    if case == "special":  # NaN, +-Inf and huge values move like any other bits
        put_specials(x)
    return (x,)


OP = register_op(Op(
    name="transpose",
    signature="transpose(x[M,N]) -> [N,M]",
    shape_keys=("M", "N"),
    **contract(globals()),
    specials=("special",),
    wide_shape={"M": 259, "N": 257},
    flops=lambda M, N: 0,
    bytes=lambda M, N, dtype=torch.float32: 2 * M * N * elem_size(dtype),
    # 1 x 1; ragged tails in both dimensions; exact 32-multiples (the tiles' fast path); a tall thin one
    check_shapes=[{"M": 1, "N": 1}, {"M": 33, "N": 17}, {"M": 64, "N": 96}, {"M": 70, "N": 45}, {"M": 129, "N": 3}],
    tolerance=lambda dtype, shape: (0.0, 0.0),  # a transpose moves bits: exact or wrong
    package="kernels.transpose.variants",
    bench_shapes={"gpu": [{"M": 2**p, "N": 2**p} for p in range(10, 15)], "quick": [{"M": 4096, "N": 4096}],
                  "cpu": [{"M": 64, "N": 64}]},
    size_key=lambda s: s["M"] * s["N"],
    doc="x[M,N] -> x^T[N,M]. 0 FLOPs and 2 elements of traffic per element: a pure access-pattern problem.",
))


@register("transpose", "torch_t", backend="torch",
          idea="Vendor baseline: x.t().contiguous() (one copy kernel that reads x through a transposed view).")
def torch_t(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous()
