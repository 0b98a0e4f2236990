"""MoE routing in CUDA C: softmax over the experts and the top-k, fused, one warp per token.

The kernels live in ``moe_topk.cu``: ``moe_topk_v<VPL>_<f32|f16|bf16>``, where VPL = ceil(E/32) rounded up to a
power of two is the number of logits each of the 32 lanes keeps in registers (1..32, so E <= 1024). A warp reads
its token's row once (fp32 math whatever the logits' dtype), reduces the max and the exp-sum with shuffles, then
runs top_k rounds of a warp argmax (ties: the lower expert id) and writes fp32 weights and int32 ids. The
[T, E] probabilities of an unfused softmax + topk never exist: that round trip is the whole cost this kernel saves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype
from kernels.moe_topk.reference import outputs
from workbench import register
from workbench.interop import to_raw
from workbench.registry import as_dtype

CU = Path(__file__).with_name("moe_topk.cu")
WARPS = 4  # tokens per block (the .cu file's WARPS): 128 threads
VPLS = (1, 2, 4, 8, 16, 32)  # compiled logits-per-lane counts
MAX_E = 32 * VPLS[-1]  # 1024 experts: 32 fp32 logits per lane; ptxas (sm_90) gives that kernel 146 registers


def vpl(e: int) -> int:
    """Return the compiled logits-per-lane count for ``e`` experts: the smallest power of two with 32*VPL >= e."""
    return next(v for v in VPLS if 32 * v >= e)


def only(e: int, dtype: torch.dtype) -> tuple[str, ...]:
    """Return the options that compile just the kernel for ``e`` experts and logits of ``dtype``."""
    return (f"-DTOPK_ONLY_VPL={vpl(e)}", *only_dtype(dtype))


def kernel(e: int, dtype: torch.dtype) -> Any:
    """Return the kernel for ``e`` experts and logits of ``dtype``.

    On a GPU, NVRTC compiles only that kernel (``only``; nvcc takes ~15 s here for all 18). The CPU engine builds
    the whole file once (one g++ run, ~3 s on 2 cores) and every kernel comes from that module.
    """
    return cuda_kernel(CU, f"moe_topk_v{vpl(e)}", dtype, gpu_options=only(e, dtype))


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return (f"moe_topk/cuda_topk keeps a token's logits in one warp's registers: E <= {MAX_E}, "
                f"got E={shape['E']}")
    return None


def _spec(e: int = 256, dtype: str = "bf16") -> dict:
    """Return what wb.inspect compiles: the kernel for ``e`` experts (default DeepSeek-V3's 256) and ``dtype``."""
    dt = as_dtype(dtype)
    return cuda_spec(CU, f"moe_topk_v{vpl(e)}", dt, options=only(e, dt))


@register("moe_topk", "cuda_topk", backend="cuda", cu_file=CU.name, supports=_supports, inspect_spec=_spec,
          idea="CUDA C: warp per token, logits in registers, shuffle max/sum softmax, top_k rounds of warp argmax.")
def cuda_topk(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
              ) -> tuple[torch.Tensor, torch.Tensor]:
    weights, ids = outputs(router_logits, top_k)
    t, e = router_logits.shape
    if t == 0:
        return weights, ids
    kernel(e, router_logits.dtype)(((t + WARPS - 1) // WARPS,), (32, WARPS),
                                   (to_raw(router_logits), to_raw(weights), to_raw(ids), np.int32(t), np.int32(e),
                                    np.int32(top_k), np.int32(bool(renormalize))))
    return weights, ids
