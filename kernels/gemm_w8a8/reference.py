"""The gemm_w8a8 contract: ``gemm_w8a8(a[M,K], b[N,K], scale_a[M], scale_b[N]) -> [M,N]`` in bfloat16.

* ``a`` (activations) and ``b`` (weights, stored ``[N, K]`` as an ``nn.Linear`` weight is, K-major) are int8,
  contiguous. ``scale_a[m]`` is row m's (token m's) fp32 scale, ``scale_b[n]`` output channel n's: the dequantized
  operands are ``scale_a[:, None] * a`` and ``scale_b[:, None] * b`` (symmetric, zero point 0).
* ``c[m, n] = scale_a[m] * scale_b[n] * sum_k a[m, k] * b[n, k]``: the sum is exact in int32 (each product is at
  most 127 * 127 = 16,129 in magnitude, so K <= 133,144 cannot overflow), the two scales multiply the sum once, in
  the epilogue, and the result is returned as bfloat16. Both scales are constant along K, which is what lets them
  leave the sum. The op's "dtype" (``make_inputs(..., dtype=)``, the checker's) is this output dtype; only
  bfloat16 is defined.
* The reference accumulates the integers in float64 (exact: every partial sum is below 2^53) and applies the
  scales in float64. Inputs come from N(0, 1) values quantized by :func:`quantize_per_token` (a) and
  :func:`quantize_per_channel` (b): ``scale = amax / 127`` per row, codes rounded to nearest and clamped to
  [-127, 127].

:func:`error_table` compares w8a8 with bf16 and fp8 (e4m3) GEMMs against the float64 product of the unquantized
inputs, for the notebook.
"""

from __future__ import annotations

import torch

from kernels.gemm.reference import cube_edge, cubes
from kernels.gemm_fp8.reference import E4M3_MAX, FP8
from workbench.contracts import randn, require, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "gemm_w8a8"
INT8_MAX = 127.0


def validate(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> dict:
    """Check the inputs of gemm_w8a8 and return the shape {M, N, K} (the scales' values are not read)."""
    require_tensor(OP_NAME, "a", a, 2, (torch.int8,), "[M,K]")
    require_tensor(OP_NAME, "b", b, 2, (torch.int8,), "[N,K]")
    require(OP_NAME, a.shape[1] == b.shape[1],
            f"a[M,K] and b[N,K] must share K (b is the weight stored [N, K], K-major): got a {tuple(a.shape)}, "
            f"b {tuple(b.shape)}")
    require_tensor(OP_NAME, "scale_a", scale_a, 1, (torch.float32,), "[M]")
    require_tensor(OP_NAME, "scale_b", scale_b, 1, (torch.float32,), "[N]")
    require(OP_NAME, scale_a.shape[0] == a.shape[0],
            f"scale_a must hold one scale per row (token) of a, [M] = [{a.shape[0]}], got {list(scale_a.shape)}")
    require(OP_NAME, scale_b.shape[0] == b.shape[0],
            f"scale_b must hold one scale per row (output channel) of b, [N] = [{b.shape[0]}], got "
            f"{list(scale_b.shape)}")
    return {"M": a.shape[0], "N": b.shape[0], "K": a.shape[1]}


def reference(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """Sum the integer products exactly (float64), then apply both scales in float64."""
    validate(a, b, scale_a, scale_b)
    acc = a.double() @ b.double().T  # exact: |partial sums| <= K * 16,129 < 2^53
    return acc * scale_a.double()[:, None] * scale_b.double()[None, :]


def _quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (int8 codes, fp32 scale per row): scale = amax / 127, codes round(x / scale) clamped to +-127."""
    x = x.float()
    amax = x.abs().amax(dim=1) if x.shape[1] else torch.zeros(x.shape[0], device=x.device)
    scale = amax.clamp_min(1e-12) / INT8_MAX  # an all-zero row gets a tiny scale and zero codes
    q = torch.round(x / scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize activations x[M,K] to int8 with one symmetric scale per row (token): (a[M,K], scale_a[M]).

    ``scale_a[m] = max_k |x[m, k]| / 127``; ``a = round(x / scale_a[:, None])`` (to nearest, ties to even) clamped
    to [-127, 127] (-128 is left out so the range is symmetric).
    """
    return _quantize_rows(x)


def quantize_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize weights w[N,K] to int8 with one symmetric scale per output channel (row n): (b[N,K], scale_b[N])."""
    return _quantize_rows(w)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Return ``q * scale[:, None]`` in float64: the values an int8 tensor with per-row scales stands for."""
    return q.double() * scale.double()[:, None]


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = randn((sizes["M"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    w = randn((sizes["N"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    (a, sa), (b, sb) = quantize_per_token(x), quantize_per_channel(w)
    return a.to(device), b.to(device), sa.to(device), sb.to(device)


def nbytes(M: int, N: int, K: int, dtype: torch.dtype = torch.bfloat16) -> float:
    return M * K + N * K + 4 * (M + N) + 2 * M * N  # 1 B per int8 in, fp32 scales, 2 B per bf16 out


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # The integer sum is exact; what remains is int32 -> fp32 (exact below 2^24 = 16,777,216, i.e. K <= 1,040
    # at worst; 2^-24 relative past it), two fp32 multiplies (2^-24 each) and the final bfloat16 rounding (8-bit
    # significand: at most 2^-9 = 1.95e-3 relative). rtol 4e-3 is twice that; atol covers outputs near zero,
    # where a relative bound means nothing: |c| ~ sqrt(K) for N(0, 1) inputs, 1e-4 * sqrt(K) is 2^-9 of 5% of it.
    k = max(1, shape.get("K", 1))
    return 1e-4 * k ** 0.5, 4e-3


OP = register_op(Op(
    name=OP_NAME,
    signature="gemm_w8a8(a[M,K] int8, b[N,K] int8, scale_a[M] fp32, scale_b[N] fp32) -> [M,N] bf16",
    shape_keys=("M", "N", "K"),
    **contract(globals()),
    flops=lambda M, N, K: 2 * M * N * K,
    check_shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 64, "N": 64, "K": 64},
                  {"M": 37, "N": 29, "K": 131}],
    dtypes=(torch.bfloat16,),
    dtype_of=lambda *inputs: torch.bfloat16,
    package="kernels.gemm_w8a8.variants",
    bench_shapes={"gpu": cubes(1024, 2048, 4096, 8192), "quick": cubes(4096), "cpu": cubes(64)},
    size_key=cube_edge,
    doc="int8 a (per-token scales) and b[N,K] (per-channel scales), int32 accumulation, scales in the epilogue, "
        "bf16 output.",
))


def _int_mm_ok(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Return whether torch._int_mm takes a @ b.T here: K > 1 on the CPU; cuBLASLt's M > 16, K, N % 8 == 0.

    torch 2.13's CPU _int_mm returns garbage for K = 1 (measured: wrong on 20 of 20 random draws, right for K >= 2).
    """
    if not a.is_cuda:
        return a.shape[1] > 1
    m, k = a.shape
    return m > 16 and k % 8 == 0 and b.shape[0] % 8 == 0 and k > 0


@register(OP_NAME, "torch_int_mm", backend="torch",
          idea="Vendor baseline: torch._int_mm (int8 x int8 -> int32, cuBLASLt IMMA on a GPU), scales after in fp32.")
def torch_int_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    if _int_mm_ok(a, b):
        acc = torch._int_mm(a, b.T).float()  # b.T: a column-major [K, N] view, the layout cuBLASLt wants
    else:  # a ragged shape cuBLASLt refuses: float64 sums of int8 products are exact (no int32 matmul on a GPU)
        acc = (a.double() @ b.double().T).float()
    return (acc * scale_a[:, None] * scale_b[None, :]).to(torch.bfloat16)


# ------------------------------------------------------------------------------------------- error study
def _fp8_rows(x: torch.Tensor, per_row: bool) -> torch.Tensor:
    """Return x (float64) rounded through e4m3 with one scale per row (per_row) or per tensor, dequantized."""
    amax = x.abs().amax(dim=1, keepdim=True) if per_row else x.abs().max().reshape(1, 1)
    scale = (amax.clamp_min(1e-12) / E4M3_MAX).float()
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8).double() * scale.double()


def error_table(M: int = 64, N: int = 64, K: int = 512, seed: int = 0, outliers: int = 0,
                outlier_scale: float = 20.0) -> list[dict]:
    """Return one row per method: its error against the float64 product of the unquantized inputs.

    x[M,K] and w[N,K] are N(0, 1); ``outliers`` activation channels (columns of x) are multiplied by
    ``outlier_scale``, as LLM activations have a few large channels. Methods: bf16 inputs (the products of the
    rounded inputs summed in float64; a GPU's fp32 sums add far less error than the rounding), e4m3 with
    a per-tensor scale, e4m3 with per-token (x) and per-channel (w) scales, and w8a8 (int8, per-token and
    per-channel); every output is rounded to bfloat16, as the GEMMs return it. Each row holds ``method``,
    ``rel_error`` (Frobenius norm of the error over that of the exact product) and ``max_abs_error``.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((M, K), generator=g, dtype=torch.float64)
    w = torch.randn((N, K), generator=g, dtype=torch.float64)
    if outliers:
        cols = torch.randperm(K, generator=g)[:outliers]
        x[:, cols] *= outlier_scale
    exact = x @ w.T
    a, sa = quantize_per_token(x)
    b, sb = quantize_per_channel(w)
    methods = {
        "bf16": x.to(torch.bfloat16).double() @ w.to(torch.bfloat16).double().T,
        "fp8 e4m3, per-tensor scales": _fp8_rows(x, False) @ _fp8_rows(w, False).T,
        "fp8 e4m3, per-token/per-channel scales": _fp8_rows(x, True) @ _fp8_rows(w, True).T,
        "int8 w8a8, per-token/per-channel scales": reference(a, b, sa, sb),
    }
    norm = exact.norm().clamp_min(1e-300)
    rows = []
    for name, c in methods.items():
        err = c.to(torch.bfloat16).double() - exact
        rows.append({"method": name, "rel_error": (err.norm() / norm).item(), "max_abs_error": err.abs().max().item()})
    return rows
