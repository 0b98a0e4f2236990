"""The vecadd contract: ``vecadd(x[N], y[N]) -> [N]``, out = x + y.

Input cases: ``random``; ``special`` (checked as a probe): NaN, +-Inf, inf + -inf and huge values, which IEEE
addition defines.
"""

from __future__ import annotations

import torch

from workbench.contracts import elem_size, put_specials, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(x: torch.Tensor, y: torch.Tensor) -> dict:
    """Check the inputs of vecadd and return the shape {N}."""
    require_tensor("vecadd", "x", x, 1, DTYPES, "[N]")
    require_tensor("vecadd", "y", y, 1, DTYPES, "[N]")
    require_same_dtype("vecadd", x=x, y=y)
    require("vecadd", x.shape == y.shape, f"x[N] and y[N] must have the same N, got {x.shape[0]} and {y.shape[0]}")
    return {"N": x.shape[0]}


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Add in float64."""
    validate(x, y)
    return x.double() + y.double()


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    n = sizes["N"]
    x, y = randn((n,), dtype, g, device), randn((n,), dtype, g, device)
    if case == "special":  # NaN, +-Inf, inf + -inf and huge values: IEEE addition defines every one
        put_specials(x, y)
    return x, y


OP = register_op(Op(
    name="vecadd",
    signature="vecadd(x[N], y[N]) -> [N]",
    shape_keys=("N",),
    **contract(globals()),
    flops=lambda N: N,
    bytes=lambda N, dtype=torch.float32: 3 * N * elem_size(dtype),
    check_shapes=[{"N": n} for n in (1, 17, 1023, 1025, 4099, 1032)],  # 1032: a multiple of 4 and 8 (vector paths)
    tolerance=lambda dtype, shape: {torch.float32: (1e-6, 1e-6), torch.float16: (1e-3, 1e-3),
                                    torch.bfloat16: (8e-3, 8e-3)}[dtype],
    package="kernels.vecadd.variants",
    bench_shapes={"gpu": [{"N": 2**p} for p in range(16, 29, 2)], "quick": [{"N": 2**20}, {"N": 2**24}],
                  "cpu": [{"N": 4096}]},
    size_key=lambda s: s["N"],
    specials=("special",),
    wide_shape={"N": 70001},
    doc="Elementwise x + y. 1 FLOP and 3 elements of traffic per element: the purest memory-bound kernel.",
))


@register("vecadd", "torch_add", backend="torch", idea="Vendor baseline: torch.add (one fused elementwise kernel).")
def torch_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y)
