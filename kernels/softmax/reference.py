"""The softmax contract: ``softmax(x[M,N]) -> [M,N]`` over the last dim, with ``torch.softmax`` semantics.

Rows that are all ``-inf`` give NaN (0/0), like torch; ``-inf`` entries give 0; large values must not overflow
(subtract the row max first). fp16/bf16 inputs accumulate in fp32 and return the input dtype.
"""

from __future__ import annotations

import torch

from workbench.contracts import elem_size, randn, require_tensor
from workbench.registry import Op, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(x: torch.Tensor) -> dict:
    """Check the input of softmax and return the shape {M, N}."""
    require_tensor("softmax", "x", x, 2, DTYPES, "[M,N]")
    return {"M": x.shape[0], "N": x.shape[1]}


def reference(x: torch.Tensor) -> torch.Tensor:
    """Compute the row softmax in float64, max-subtracted; all -inf rows give NaN."""
    validate(x)
    x = x.double()
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)  # an all -inf row gives (-inf) - (-inf) = NaN, as torch does
    return e / e.sum(dim=-1, keepdim=True)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = sizes["M"], sizes["N"]
    x = randn((m, n), torch.float32, g, torch.device("cpu"), scale=3.0)
    if case == "edge":
        # -inf entries, one row offset by +1e4 (overflows a softmax that forgets the max), one all -inf row.
        x[torch.rand((m, n), generator=g) < 0.1] = float("-inf")
        x[0, 0] = 0.0  # keep row 0 finite
        if m > 1:
            x[1] += 1.0e4 if dtype == torch.float32 else 6.0e4 if dtype == torch.float16 else 1.0e30
        if m > 2:
            x[2] = float("-inf")
    return (x.to(dtype).to(device),)


OP = register_op(Op(
    name="softmax",
    signature="softmax(x[M,N]) -> [M,N]",
    shape_keys=("M", "N"),
    make=make,
    validate=validate,
    reference=reference,
    flops=lambda M, N: 5 * M * N,  # max, subtract, exp, sum, divide
    bytes=lambda M, N, dtype=torch.float32: 2 * M * N * elem_size(dtype),
    check_shapes=[{"M": 1, "N": 1}, {"M": 17, "N": 33}, {"M": 4, "N": 1023}, {"M": 3, "N": 1025}],
    tolerance=lambda dtype, shape: {torch.float32: (1e-6, 1e-5), torch.float16: (1e-3, 1e-3),
                                    torch.bfloat16: (8e-3, 8e-3)}[dtype],
    package="kernels.softmax.variants",
    bench_shapes={"gpu": [{"M": 2**26 // n, "N": n} for n in (1024, 4096, 16384, 65536)],
                  "quick": [{"M": 4096, "N": 4096}], "cpu": [{"M": 16, "N": 1024}]},
    size_key=lambda s: s["N"],
    cases=("random", "edge"),
    doc="Row softmax; ~5 FLOPs per element against 2 elements of traffic: memory-bound on every GPU.",
))


@register("softmax", "torch_softmax", backend="torch", idea="Vendor baseline: torch.softmax over the last dim.")
def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)
