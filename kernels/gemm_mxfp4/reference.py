"""The gemm_mxfp4 contract: ``gemm_mxfp4(a[M,K/2], a_scale[M,K/32], b[N,K/2], b_scale[N,K/32]) -> [M,N]`` bf16.

OCP Microscaling (MX) v1.0, the MXFP4 format: a block of 32 consecutive values along K shares one scale.

* **Elements: FP4 e2m1**, a sign bit, 2 exponent bits (bias 1) and 1 mantissa bit. The 8 magnitudes are
  0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0-7; code 8 + c is the negative of code c, so 8 is -0). No inf, no NaN.
* **Packing: two values per uint8, low nibble first.** Byte ``j`` of a row holds element ``2j`` in bits 0-3 and
  element ``2j + 1`` in bits 4-7 (the order Triton's ``tl.dot_scaled`` and the OCP reference code use). ``a`` is
  ``[M, K/2]`` uint8 and ``b`` is the weight ``[N, K/2]`` uint8, both packed along K (K-major).
* **Scales: E8M0**, one uint8 per block of 32 elements along K: ``a_scale[M, K/32]`` and ``b_scale[N, K/32]``. Byte
  ``s`` means ``2^(s - 127)`` (no sign, no mantissa); 255 is NaN.
* ``c[m, n] = sum_k A[m, k] * B[n, k]`` with ``A[m, k] = e2m1(a, m, k) * 2^(a_scale[m, k // 32] - 127)`` and ``B``
  likewise, returned as bfloat16. K (the number of fp4 values per row) must be a multiple of 32: a real
  tensor's K is padded with zero codes to whole blocks. The op's "dtype" is this output dtype; only bfloat16.
* The reference decodes every code and scale in float64 and multiplies: exact for the codes it is given. Inputs
  come from N(0, 1) values quantized by :func:`quantize_mxfp4` (the OCP recipe: a block's scale is 2 to the
  floor(log2(amax)) - 2, 2 being e2m1's largest exponent, so the block's largest value lands in [4, 8) and codes
  round to nearest, saturating at 6).

:func:`block_scales` returns a matrix's per-block scale exponents (the notebook draws them).
"""

from __future__ import annotations

import torch

from kernels.gemm.reference import cube_edge
from workbench.contracts import randn, require, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "gemm_mxfp4"
BLOCK = 32  # elements per shared scale (OCP MX)
E2M1_MAX = 6.0
E2M1_EMAX = 2  # the largest e2m1 exponent: 6 = 1.5 * 2^2
#: The e2m1 magnitudes of codes 0-7; code 8 + c is -E2M1[c].
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def validate(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> dict:
    """Check the inputs of gemm_mxfp4 and return the shape {M, N, K} (K counts fp4 values, two per byte)."""
    require_tensor(OP_NAME, "a", a, 2, (torch.uint8,), "[M,K/2]")
    require_tensor(OP_NAME, "b", b, 2, (torch.uint8,), "[N,K/2]")
    require(OP_NAME, a.shape[1] == b.shape[1],
            f"a[M,K/2] and b[N,K/2] must share K (both packed two e2m1 values per byte along K): got a "
            f"{tuple(a.shape)}, b {tuple(b.shape)}")
    k = 2 * a.shape[1]
    require(OP_NAME, k % BLOCK == 0,
            f"K = 2 * a.shape[1] = {k} must be a multiple of the MX block of {BLOCK} values (pad K with zero codes)")
    require_tensor(OP_NAME, "a_scale", a_scale, 2, (torch.uint8,), "[M,K/32]")
    require_tensor(OP_NAME, "b_scale", b_scale, 2, (torch.uint8,), "[N,K/32]")
    for name, s, rows, what in (("a_scale", a_scale, a.shape[0], "M"), ("b_scale", b_scale, b.shape[0], "N")):
        require(OP_NAME, tuple(s.shape) == (rows, k // BLOCK),
                f"{name} must hold one e8m0 scale per row and block of {BLOCK} values along K, [{what}, K/32] = "
                f"[{rows}, {k // BLOCK}], got {list(s.shape)}")
    return {"M": a.shape[0], "N": b.shape[0], "K": k}


def decode_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Return the float64 values of a packed e2m1 matrix [R, K/2] as [R, K] (low nibble = even element)."""
    lut = torch.tensor(E2M1 + tuple(-v for v in E2M1), dtype=torch.float64, device=packed.device)
    p = packed.long()
    codes = torch.stack((p & 15, p >> 4), dim=-1).reshape(packed.shape[0], 2 * packed.shape[1])  # 2j low, 2j+1 high
    return lut[codes]


def decode_e8m0(scale: torch.Tensor) -> torch.Tensor:
    """Return 2^(s - 127) in float64 for e8m0 bytes s (255 is NaN)."""
    v = torch.exp2(scale.double() - 127.0)
    return torch.where(scale == 255, torch.nan, v)


def dequantize(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Return the float64 matrix [R, K] an MXFP4 (codes, scales) pair stands for."""
    return decode_e2m1(packed) * decode_e8m0(scale).repeat_interleave(BLOCK, dim=1)


def reference(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    """Decode both operands in float64 and multiply."""
    validate(a, a_scale, b, b_scale)
    return dequantize(a, a_scale) @ dequantize(b, b_scale).T


def _e2m1_codes(y: torch.Tensor) -> torch.Tensor:
    """Return the e2m1 code nearest to each value of y (ties to the even code, saturating at +-6), as int64."""
    mags = torch.tensor(E2M1, dtype=torch.float64, device=y.device)
    d = (y.double().abs()[..., None] - mags).abs()
    nearest = d == d.min(dim=-1, keepdim=True).values
    pick = (~nearest).long() * 2 + (torch.arange(8, device=y.device) & 1)  # among the nearest, the even code
    code = pick.argmin(dim=-1)
    return torch.where(y < 0, code + 8, code)  # -0.0 keeps code 0


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize x[R,K] (K a multiple of 32) to MXFP4: (codes [R, K/2] uint8, e8m0 scales [R, K/32] uint8).

    Per block of 32: scale exponent ``e = floor(log2(amax)) - 2`` (clamped to e8m0's [-127, 127]; an all-zero block
    gets e = -127), codes = the nearest e2m1 value of ``x / 2^e`` (ties to the even code; 6 where it is larger).
    """
    r, k = x.shape
    if k % BLOCK:
        raise ValueError(f"quantize_mxfp4: K = {k} must be a multiple of {BLOCK}")
    blocks = x.double().reshape(r, k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=-1)
    e = torch.where(amax > 0, torch.floor(torch.log2(amax.clamp_min(1e-300))) - E2M1_EMAX, torch.full_like(amax, -127))
    e = e.clamp(-127, 127)
    codes = _e2m1_codes(blocks / torch.exp2(e)[..., None]).reshape(r, k)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    return packed, (e + 127).to(torch.uint8)


def block_scales(x: torch.Tensor) -> torch.Tensor:
    """Return the MXFP4 scale exponents of x[R,K] (int64 [R, K/32]): block (r, j) is scaled by 2^result[r, j]."""
    _, s = quantize_mxfp4(x)
    return s.long() - 127


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = randn((sizes["M"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    w = randn((sizes["N"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    (a, sa), (b, sb) = quantize_mxfp4(x), quantize_mxfp4(w)
    return a.to(device), sa.to(device), b.to(device), sb.to(device)


def nbytes(M: int, N: int, K: int, dtype: torch.dtype = torch.bfloat16) -> float:
    return (M + N) * (K // 2 + K // BLOCK) + 2 * M * N  # half a byte per value, a byte per 32 values, bf16 out


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # e2m1 values have at most 2 significant bits and the scales are powers of two, so every product is exact in
    # fp32 and in bf16 inputs; what remains is fp32 summation (~K * 6e-8 relative) and the final bfloat16
    # rounding (2^-9 = 2e-3 relative). |c| ~ sqrt(K) for the N(0, 1) inputs make() quantizes.
    k = max(1, shape.get("K", 1))
    return 1e-5 * k, 4e-3


OP = register_op(Op(
    name=OP_NAME,
    signature="gemm_mxfp4(a[M,K/2] u8 e2m1x2, a_scale[M,K/32] u8 e8m0, b[N,K/2] u8 e2m1x2, b_scale[N,K/32] u8 e8m0) "
              "-> [M,N] bf16",
    shape_keys=("M", "N", "K"),
    **contract(globals()),
    flops=lambda M, N, K: 2 * M * N * K,
    check_shapes=[{"M": 1, "N": 1, "K": 32}, {"M": 17, "N": 33, "K": 64}, {"M": 40, "N": 20, "K": 96},
                  {"M": 64, "N": 64, "K": 128}],
    dtypes=(torch.bfloat16,),
    dtype_of=lambda *inputs: torch.bfloat16,
    package="kernels.gemm_mxfp4.variants",
    bench_shapes={"gpu": [{"M": n, "N": n, "K": n} for n in (1024, 2048, 4096, 8192)],
                  "quick": [{"M": 4096, "N": 4096, "K": 4096}], "cpu": [{"M": 64, "N": 64, "K": 128}]},
    size_key=cube_edge,
    doc="OCP MXFP4: e2m1 values packed two per byte (low nibble first) along K, one e8m0 scale per 32 values "
        "along K for each row of a and of b[N,K]; K a multiple of 32; bf16 output.",
))


@register(OP_NAME, "torch_dequant", backend="torch",
          idea="Baseline: decode codes and scales to floats (bf16 on a GPU, exact) and call torch.matmul.")
def torch_dequant(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    validate(a, a_scale, b, b_scale)
    # Every MX value (2 significant bits times a power of two) is exact in bf16 (8 exponent bits, as e8m0), so
    # a GPU multiplies bf16 copies on its tensor cores; the CPU in fp32.
    dt = torch.bfloat16 if a.is_cuda else torch.float32
    return (dequantize(a, a_scale).to(dt) @ dequantize(b, b_scale).to(dt).T).to(torch.bfloat16)
