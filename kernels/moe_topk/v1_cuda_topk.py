"""MoE routing in CUDA C: softmax over the experts and the top-k, fused, one warp per token.

The kernels live in ``moe_topk.cu``: ``moe_topk_v<VPL>_<f32|f16|bf16>``, where VPL = ceil(E/32) rounded up to a
power of two is the number of logits each of the 32 lanes keeps in registers (1..32, so E <= 1024). A warp reads
its token's row once (fp32 math whatever the logits' dtype), reduces the max and the exp-sum with shuffles, then
runs top_k rounds of a warp argmax (ties: the lower expert id) and writes fp32 weights and int32 ids. The
[T, E] probabilities of an unfused softmax + topk never exist: that round trip is the whole cost this kernel saves.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench import empty, register
from workbench.interop import to_raw

HERE = Path(__file__).parent
CU = "moe_topk.cu"
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
DT_CODE = {"f32": 1, "f16": 2, "bf16": 3}  # the .cu file's TOPK_ONLY_DT
WARPS = 4  # tokens per block (the .cu file's WARPS): 128 threads
VPLS = (1, 2, 4, 8, 16, 32)  # compiled logits-per-lane counts
MAX_E = 32 * VPLS[-1]  # 1024 experts: 32 fp32 logits per lane; ptxas (sm_90) gives that kernel 146 registers
_kernels: dict[str, object] = {}
_module: list = []  # cpu mode: one CPU-engine module for the whole .cu file


def vpl(e: int) -> int:
    """Return the compiled logits-per-lane count for ``e`` experts: the smallest power of two with 32*VPL >= e."""
    return next(v for v in VPLS if 32 * v >= e)


def only(e: int, suffix: str) -> tuple[str, ...]:
    """Return the nvcc options that compile just the kernel for ``e`` experts and dtype ``suffix`` (f32/f16/bf16)."""
    return (f"-DTOPK_ONLY_VPL={vpl(e)}", f"-DTOPK_ONLY_DT={DT_CODE[suffix]}")


def kernel(e: int, dtype: torch.dtype):
    """Return the kernel for ``e`` experts and logits of ``dtype`` (cached per process).

    On a GPU, NVRTC compiles only that kernel (``only``; nvcc takes ~15 s here for all 18). The CPU engine builds
    the whole file once (one g++ run, ~3 s on 2 cores) and every kernel comes from that module.
    """
    from workbench import MODE, cuda

    name = f"moe_topk_v{vpl(e)}_{SUFFIX[dtype]}"
    if name not in _kernels:
        if MODE == "gpu":
            _kernels[name] = cuda.RawKernel(HERE / CU, name, options=only(e, SUFFIX[dtype]))
        else:
            if not _module:
                _module.append(cuda.RawModule(HERE / CU))
            _kernels[name] = _module[0].get_function(name)
    return _kernels[name]


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return (f"moe_topk/cuda_topk keeps a token's logits in one warp's registers: E <= {MAX_E}, "
                f"got E={shape['E']}")
    return None


def _spec(e: int = 256, dtype: str = "bf16") -> dict:
    """Return what wb.inspect compiles: the kernel for ``e`` experts (default DeepSeek-V3's 256) and ``dtype``."""
    return {"kind": "cuda", "code": HERE / CU, "name": f"moe_topk_v{vpl(e)}_{dtype}", "options": only(e, dtype)}


@register("moe_topk", "cuda_topk", backend="cuda", cu_file=CU, supports=_supports, inspect_spec=_spec,
          idea="CUDA C: warp per token, logits in registers, shuffle max/sum softmax, top_k rounds of warp argmax.")
def cuda_topk(router_logits: torch.Tensor, top_k: int, renormalize: bool = True
              ) -> tuple[torch.Tensor, torch.Tensor]:
    t, e = router_logits.shape
    weights = empty((t, top_k), torch.float32, router_logits.device)
    ids = empty((t, top_k), torch.int32, router_logits.device)
    if t == 0:
        return weights, ids
    kernel(e, router_logits.dtype)(((t + WARPS - 1) // WARPS,), (32, WARPS),
                                   (to_raw(router_logits), to_raw(weights), to_raw(ids), np.int32(t), np.int32(e),
                                    np.int32(top_k), np.int32(bool(renormalize))))
    return weights, ids
