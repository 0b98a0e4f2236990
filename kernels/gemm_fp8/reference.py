"""The gemm_fp8 contract: ``gemm_fp8(a[M,K], bt[N,K], scale_a[1], scale_b[1]) -> [M,N]`` in bfloat16.

* ``a`` and ``bt`` are ``float8_e4m3fn`` (4 exponent bits, 3 mantissa bits, max 448), contiguous. ``bt`` is b
  stored transposed, K-major ("TN"), because FP8 tensor-core instructions (Hopper wgmma) read both operands
  K-major; it is also the layout ``torch._scaled_mm`` and cuBLASLt require.
* ``scale_a`` and ``scale_b`` are one-element float32 tensors: the dequantized operands are ``scale_a * a`` and
  ``scale_b * bt`` (per-tensor scaling, as in FP8 training/inference recipes).
* ``c = scale_a * scale_b * (a @ bt.T)`` accumulated in (at least) fp32, returned as bfloat16. The op's "dtype"
  (``make_inputs(..., dtype=)``, the checker's dtype) is this output dtype; only bfloat16 is defined.
* The reference dequantizes in float64. Inputs are made from N(0, 1) values quantized with scale = amax / 448.
"""

from __future__ import annotations

import torch

from kernels.gemm.reference import cube_edge, cubes
from workbench.contracts import randn, require, require_tensor
from workbench.registry import Op, contract, register, register_op

FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def validate(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> dict:
    """Check the inputs of gemm_fp8 and return the shape {M, N, K} (no device sync: scales are not read)."""
    require_tensor("gemm_fp8", "a", a, 2, (FP8,), "[M,K]")
    require_tensor("gemm_fp8", "bt", bt, 2, (FP8,), "[N,K]")
    require("gemm_fp8", a.shape[1] == bt.shape[1],
            f"a[M,K] and bt[N,K] must share K (bt is b transposed, K-major): got a {tuple(a.shape)}, "
            f"bt {tuple(bt.shape)}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        require_tensor("gemm_fp8", name, s, 1, (torch.float32,), "[1]")
        require("gemm_fp8", s.numel() == 1, f"{name} must hold one element (a per-tensor scale), got {s.numel()}")
    return {"M": a.shape[0], "N": bt.shape[0], "K": a.shape[1]}


def reference(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """Dequantize in float64 and multiply."""
    validate(a, bt, scale_a, scale_b)
    return (a.double() * scale_a.double()) @ (bt.double() * scale_b.double()).T


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (x / scale as e4m3, scale) with a per-tensor scale = amax / 448 (float32, shape [1])."""
    amax = (x.abs().max() if x.numel() else torch.zeros((), dtype=x.dtype)).clamp_min(1e-12).float()  # empty: 1e-12
    scale = (amax / E4M3_MAX).reshape(1)
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8), scale


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = randn((sizes["M"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    w = randn((sizes["N"], sizes["K"]), torch.float32, g, torch.device("cpu"))
    (a, sa), (bt, sb) = quantize(x), quantize(w)
    return a.to(device), bt.to(device), sa.to(device), sb.to(device)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    # Products of e4m3 values are exact in fp32; what remains is fp32 summation (~K * 6e-8 relative) and the
    # final rounding to bfloat16 (8-bit mantissa: 2^-9 = 2e-3 relative). |c| ~ sqrt(K) for N(0,1) inputs.
    k = max(1, shape.get("K", 1))
    return 1e-5 * k, 4e-3


OP = register_op(Op(
    name="gemm_fp8",
    signature="gemm_fp8(a[M,K], bt[N,K], scale_a[1], scale_b[1]) -> [M,N]",
    shape_keys=("M", "N", "K"),
    **contract(globals()),
    flops=lambda M, N, K: 2 * M * N * K,
    bytes=lambda M, N, K, dtype=torch.bfloat16: M * K + N * K + 2 * M * N + 8,  # 1 B per e4m3 in, 2 B per bf16 out
    check_shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 64, "N": 64, "K": 64},
                  {"M": 127, "N": 65, "K": 129}],
    dtypes=(torch.bfloat16,),
    package="kernels.gemm_fp8.variants",
    bench_shapes={"gpu": cubes(1024, 2048, 4096, 8192), "quick": cubes(4096), "cpu": cubes(64)},
    size_key=cube_edge,
    doc="e4m3 inputs with per-tensor fp32 scales, fp32 accumulation, bf16 output; b given K-major as bt[N,K].",
))


@register("gemm_fp8", "torch_scaled", backend="torch",
          idea="Vendor baseline: torch._scaled_mm (cuBLASLt FP8) on a GPU; dequantize + fp32 matmul elsewhere.")
def torch_scaled(a: torch.Tensor, bt: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = bt.shape[0]
    if a.is_cuda and m * n * k and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:  # cuBLASLt FP8: 16-aligned, non-empty
        return torch._scaled_mm(a, bt.t(), scale_a=scale_a.reshape(()), scale_b=scale_b.reshape(()),
                                out_dtype=torch.bfloat16)
    return ((a.float() @ bt.float().T) * (scale_a * scale_b)).to(torch.bfloat16)
