"""The softmax contract: ``softmax(x[M,N]) -> [M,N]`` over the last dim, with ``torch.softmax`` semantics.

Rows that are all ``-inf`` give NaN (0/0), like torch; ``-inf`` entries give 0; a row holding a NaN is NaN
everywhere, wherever the NaN sits; large values must not overflow (subtract the row max first). An empty input
(M or N = 0) gives an empty output. fp16/bf16 inputs accumulate in fp32 and return the input dtype.

Input cases: ``random``; ``edge`` (row 0 all ``-inf`` but its last element, so every chunk or lane but the last
sees only ``-inf``; a row offset by a huge value; an all ``-inf`` row; scattered ``-inf``); ``nan`` (a NaN as the
first element of row 0 (lane 0's first), at column 5 of row 1, the last of row 2, and among ``-inf`` in row 3;
the other rows stay finite and must stay right); ``inf`` (checked as a probe: a ``+inf`` in rows 0-2, first,
last among ``-inf``, twice: each such row is NaN, as in torch).
"""

from __future__ import annotations

import torch

from workbench.contracts import elem_size, randn, require_tensor
from workbench.registry import Op, contract, register, register_op

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(x: torch.Tensor) -> dict:
    """Check the input of softmax and return the shape {M, N}."""
    require_tensor("softmax", "x", x, 2, DTYPES, "[M,N]")
    return {"M": x.shape[0], "N": x.shape[1]}


def reference(x: torch.Tensor) -> torch.Tensor:
    """Compute the row softmax in float64, max-subtracted; all -inf rows give NaN."""
    validate(x)
    x = x.double()
    if x.numel() == 0:  # no rows, or rows of no elements: nothing to normalise
        return x.clone()
    m = x.amax(dim=-1, keepdim=True)  # NaN for a row holding a NaN: the whole row is NaN, as in torch
    e = torch.exp(x - m)  # an all -inf row gives (-inf) - (-inf) = NaN, as torch does
    return e / e.sum(dim=-1, keepdim=True)


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    m, n = sizes["M"], sizes["N"]
    x = randn((m, n), torch.float32, g, torch.device("cpu"), scale=3.0)
    if case == "edge" and x.numel():
        # -inf entries, a row that is -inf but for its last element (every chunk, lane or tile before the last sees
        # only -inf: an online rescale exp(m_old - m_new) needs its -inf guard), one row offset by +1e4
        # (overflows a softmax that forgets the max), one all -inf row.
        x[torch.rand((m, n), generator=g) < 0.1] = float("-inf")
        x[0, :-1] = float("-inf")
        x[0, -1] = 0.5
        if m > 1:
            x[1] += 1.0e4 if dtype == torch.float32 else 6.0e4 if dtype == torch.float16 else 1.0e30
        if m > 2:
            x[2] = float("-inf")
    elif case == "nan":
        put_nans(x)
    elif case == "inf" and x.numel():  # +inf: its row is NaN (inf - inf), as torch.softmax gives
        x[0, 0] = float("inf")
        if m > 1:
            x[1, :] = float("-inf")
            x[1, n - 1] = float("inf")
        if m > 2 and n > 1:
            x[2, 1] = x[2, n // 2] = float("inf")
    return (x.to(dtype).to(device),)


def put_nans(x: torch.Tensor) -> None:
    """Put the ``nan`` case's NaNs into rows 0-3 of ``x[M,N]`` in place (rows past 3 stay as they are)."""
    m, n = x.shape
    if not x.numel():
        return
    x[0, 0] = float("nan")  # the first element of lane 0 / thread 0: a max that starts at -inf must not drop it
    if m > 1:
        x[1, min(5, n - 1)] = float("nan")  # lane 5's first element
    if m > 2:
        x[2, n - 1] = float("nan")  # the last element: a tail
    if m > 3:
        x[3] = float("-inf")  # a NaN among -inf only: the running max never leaves -inf
        x[3, n // 2] = float("nan")


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Return 'normalizer' when each row, or each lane's share of it (columns mod 32), is off by one factor."""
    out, ref = outs[0], refs[0]
    m, n = ref.shape
    finite_row = torch.isfinite(ref).all(dim=1, keepdim=True)  # rows with a NaN (NaN inputs, all -inf) aside
    use = finite_row & (ref > 1e-12)  # softmax outputs are >= 0; a factor shows on the non-zero ones
    rest_ok = (out - ref).abs() <= atol + rtol * ref.abs()
    if not use.any() or not rest_ok[finite_row.expand_as(ref) & ~use].all():
        return None
    lanes = 32
    pad = (-n) % lanes
    ratio = torch.where(use, out / ref.clamp_min(1e-300), torch.nan)
    ratio = torch.nn.functional.pad(ratio, (0, pad), value=float("nan")).reshape(m, -1, lanes)
    factor = ratio.nanmedian(dim=1).values  # [M, 32]: one factor per row and lane
    pred = ref * factor.nan_to_num(nan=1.0).repeat(1, (n + pad) // lanes)[:, :n]
    fits = ((out - pred).abs() <= atol + rtol * pred.abs()) | ~use
    off = (factor - 1).abs() > 4 * rtol  # NaN factors (rows set aside) compare False
    return "normalizer" if bool(fits.all()) and bool(off.any()) else None


OP = register_op(Op(
    name="softmax",
    signature="softmax(x[M,N]) -> [M,N]",
    shape_keys=("M", "N"),
    **contract(globals()),
    flops=lambda M, N: 5 * M * N,  # max, subtract, exp, sum, divide
    bytes=lambda M, N, dtype=torch.float32: 2 * M * N * elem_size(dtype),
    # Ragged sizes for the tails, and M = 8, N = 264 (multiples of 4 and 8, not of 32) for the vectorised paths.
    check_shapes=[{"M": 1, "N": 1}, {"M": 17, "N": 33}, {"M": 4, "N": 1023}, {"M": 3, "N": 1025}, {"M": 8, "N": 264}],
    tolerance=lambda dtype, shape: {torch.float32: (1e-6, 1e-5), torch.float16: (1e-3, 1e-3),
                                    torch.bfloat16: (8e-3, 8e-3)}[dtype],
    package="kernels.softmax.variants",
    bench_shapes={"gpu": [{"M": 2**26 // n, "N": n} for n in (1024, 4096, 16384, 65536)],
                  "quick": [{"M": 4096, "N": 4096}], "cpu": [{"M": 16, "N": 1024}]},
    size_key=lambda s: s["N"],
    cases=("random", "edge", "nan"),
    specials=("edge", "nan", "inf"),
    wide_shape={"M": 33, "N": 2000},
    doc="Row softmax; ~5 FLOPs per element against 2 elements of traffic: memory-bound on every GPU.",
))


@register("softmax", "torch_softmax", backend="torch", idea="Vendor baseline: torch.softmax over the last dim.")
def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)
