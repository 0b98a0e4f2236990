"""The gemm_fp8_block contract: ``gemm_fp8_block(a[M,K], a_scale[M,G(K)], b[N,K], b_scale[G(N),G(K)]) -> [M,N]``.

``G(n) = ceil(n / 128)``: the number of 128-wide quantization groups along a dimension, the last one ragged.

* ``a`` and ``b`` are ``float8_e4m3fn``, contiguous and row-major. ``b`` is stored K-major ([N, K], b transposed,
  "TN"), the operand layout of FP8 tensor-core instructions, as in ``gemm_fp8``.
* ``a_scale[m, g]`` (float32) scales the 128 elements ``a[m, 128g : 128g + 128]``: one scale per row and
  128-wide K group ("1x128", DeepSeek-V3's activation scales).
* ``b_scale[j, g]`` (float32) scales the 128x128 block ``b[128j : 128j + 128, 128g : 128g + 128]`` (its weight
  scales). The blocks of the last row and column of blocks are ragged when N or K is not a multiple of 128.
* The result is the product of the dequantized operands, summed one K group at a time::

      c[m, n] = sum_g a_scale[m, g] * b_scale[n // 128, g] * sum_{k in group g} a[m, k] * b[n, k]

  accumulated in (at least) fp32 and returned as bfloat16. Each group's partial sum carries its own pair of
  scales, so the scales cannot be pulled out of the K sum as ``gemm_fp8``'s per-tensor ones are: they are applied
  per K group, to the fp32 partial sum of that group. The op's "dtype" (``make_inputs(..., dtype=)``) is this
  output dtype; only bfloat16 is defined.

The reference dequantizes both operands in float64 and multiplies. Inputs are N(0, 1) values quantized with
moe_fp8's own quantizers (``quantize_groups`` for a, ``quantize_blocks`` for b): scale = max(amax, 1e-12) / 448 per
group or block, so each group's largest element lands on e4m3's largest finite value.
"""

from __future__ import annotations

import torch

from kernels.gemm.reference import cube_edge, cubes
from kernels.gemm_fp8.reference import FP8
from kernels.moe_fp8.reference import (
    GROUP,
    dequantize_blocks,
    dequantize_groups,
    groups,
    quantize_blocks,
    quantize_groups,
)
from workbench.contracts import randn, require, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "gemm_fp8_block"


def validate(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> dict:
    """Check the inputs of gemm_fp8_block and return the shape {M, N, K} (no device sync: scales are not read)."""
    require_tensor(OP_NAME, "a", a, 2, (FP8,), "[M,K]")
    require_tensor(OP_NAME, "b", b, 2, (FP8,), "[N,K]")
    require(OP_NAME, a.shape[1] == b.shape[1],
            f"a[M,K] and b[N,K] must share K (b is stored K-major, b transposed): got a {tuple(a.shape)}, "
            f"b {tuple(b.shape)}")
    m, k = a.shape
    n = b.shape[0]
    require_tensor(OP_NAME, "a_scale", a_scale, 2, (torch.float32,), "[M,G(K)]")
    require_tensor(OP_NAME, "b_scale", b_scale, 2, (torch.float32,), "[G(N),G(K)]")
    want_a, want_b = (m, groups(k)), (groups(n), groups(k))
    require(OP_NAME, tuple(a_scale.shape) == want_a,
            f"a_scale must hold one scale per row of a and 128-wide K group, [M, ceil(K/128)] = "
            f"[{m}, ceil({k}/128)] = {list(want_a)}, got {list(a_scale.shape)}")
    require(OP_NAME, tuple(b_scale.shape) == want_b,
            f"b_scale must hold one scale per 128x128 block of b, [ceil(N/128), ceil(K/128)] = "
            f"[ceil({n}/128), ceil({k}/128)] = {list(want_b)}, got {list(b_scale.shape)}")
    return {"M": m, "N": n, "K": k}


def reference(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    """Dequantize both operands in float64 (each element times its group's or block's scale) and multiply."""
    validate(a, a_scale, b, b_scale)
    return dequantize_groups(a, a_scale) @ dequantize_blocks(b[None], b_scale[None])[0].T


def quantize_operands(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Return (a, a_scale, b, b_scale): x[M,K] in 1x128 groups, w[N,K] in 128x128 blocks, with moe_fp8's quantizers."""
    a, a_scale = quantize_groups(x.float())
    b, b_scale = quantize_blocks(w.float()[None])
    return a, a_scale.float().contiguous(), b[0].contiguous(), b_scale[0].contiguous()


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = randn((sizes["M"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    w = randn((sizes["N"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    return tuple(t.to(device) for t in quantize_operands(x, w))


def nbytes(M: int, N: int, K: int, dtype: torch.dtype = torch.bfloat16) -> float:
    # 1 B per e4m3 input, 4 B per fp32 scale, 2 B per bf16 output.
    return M * K + N * K + 4 * (M * groups(K) + groups(N) * groups(K)) + 2 * M * N


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # Products of e4m3 values are exact in fp32, and so is each group's partial sum up to fp32 rounding (~128 *
    # 6e-8 relative); the scales multiply it once per group. What remains is the fp32 sum over groups and the
    # final rounding to bfloat16 (2^-9 = 2e-3 relative). |c| ~ sqrt(K) for N(0, 1) inputs. The checker also
    # allows 2x the torch baseline's error (the same recipe in fp32, rounded to bf16).
    k = max(1, shape.get("K", 1))
    return 1e-5 * k, 4e-3


OP = register_op(Op(
    name=OP_NAME,
    signature="gemm_fp8_block(a[M,K], a_scale[M,G(K)], b[N,K], b_scale[G(N),G(K)]) -> [M,N]",
    shape_keys=("M", "N", "K"),
    **contract(globals()),
    flops=lambda M, N, K: 2 * M * N * K,
    # K = 300 and 260 leave a ragged last K group (44 and 4 wide); N = 150 a ragged second block row of b.
    check_shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 40, "N": 20, "K": 300},
                  {"M": 9, "N": 150, "K": 260}],
    dtypes=(torch.bfloat16,),
    package="kernels.gemm_fp8_block.variants",
    bench_shapes={"gpu": cubes(1024, 2048, 4096, 8192), "quick": cubes(4096), "cpu": [{"M": 64, "N": 64, "K": 256}]},
    size_key=cube_edge,
    doc="e4m3 inputs, fp32 scales per 1x128 group of a and 128x128 block of b (DeepSeek-V3), bf16 output.",
))


@register(OP_NAME, "torch_dequant", backend="torch",
          idea="Vendor-style baseline: dequantize both operands to fp32 (each value times its scale) and matmul.")
def torch_dequant(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    k = a.shape[1]
    sa = a_scale.repeat_interleave(GROUP, dim=1)[:, :k]
    sb = b_scale.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)[:b.shape[0], :k]
    return ((a.float() * sa) @ (b.float() * sb).T).to(torch.bfloat16)
