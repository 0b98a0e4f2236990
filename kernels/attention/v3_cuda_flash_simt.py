"""Attention in CUDA C, FlashAttention in SIMT: Q in registers, K/V tiles in shared memory, online softmax.

The kernels live in ``attn_flash_simt.cu``, one per (padded head dim, dtype): ``attn_flash_simt_d<HD>_<f32|f16|bf16>``
with HD in {16, 32, 64, 128}; D is zero-padded up to the next HD, so any head dim 1 <= D <= 128 runs. The helpers
here (kernel cache, head-dim check, launch arguments) are shared with the tensor-core variants (v4, v5).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from workbench import empty_like, register
from workbench.contracts import require
from workbench.interop import to_raw

HERE = Path(__file__).parent
CU = "attn_flash_simt.cu"
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
HEAD_DIMS = (16, 32, 64, 128)  # compiled (padded) head dims
BR, G = 32, 4  # query rows per block, threads per row: 128 threads (the .cu file's BR and G)
LOG2E = 1.4426950408889634  # the kernels use exp2f: exp(x) = 2^(x * log2(e))
DT_CODE = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}  # the .cu files' ATTN_ONLY_DT
_kernels: dict[tuple[str, str], object] = {}
_modules: dict[str, object] = {}  # cpu mode: one CPU-engine module per .cu file


def only(hd: int, dtype: torch.dtype) -> tuple[str, ...]:
    """Return the nvcc options that compile just the (head dim, dtype) kernel of an attention .cu file."""
    return (f"-DATTN_ONLY_HD={hd}", f"-DATTN_ONLY_DT={DT_CODE[dtype]}")


def kernel(cu: str, hd: int, dtype: torch.dtype, base: str):
    """Return the compiled kernel ``<base>_d<hd>_<dtype>`` of ``cu`` (cached per process).

    On a GPU, NVRTC compiles only that kernel (``only``): all of them take ~20 s. The CPU engine builds the whole
    file once (one preprocessing pass to find the macro-made kernels, one C++ build) and every kernel comes from
    that one module.
    """
    from workbench import MODE, cuda

    name = f"{base}_d{hd}_{SUFFIX[dtype]}"
    if (cu, name) not in _kernels:
        if MODE == "gpu":
            _kernels[(cu, name)] = cuda.RawKernel(HERE / cu, name, options=only(hd, dtype))
        else:
            if cu not in _modules:
                _modules[cu] = cuda.RawModule(HERE / cu)
            _kernels[(cu, name)] = _modules[cu].get_function(name)
    return _kernels[(cu, name)]


def head_dim_problem(who: str, d: int, head_dims: tuple[int, ...] = HEAD_DIMS, pad: bool = True) -> str | None:
    """Return why head dim ``d`` is not supported by variant ``who`` (None when it is)."""
    if pad and 1 <= d <= head_dims[-1]:
        return None
    if not pad and d in head_dims:
        return None
    allowed = f"1 <= D <= {head_dims[-1]} (padded to {', '.join(map(str, head_dims))})" if pad else \
        f"D in {{{', '.join(map(str, head_dims))}}}"
    return f"attention/{who}: head dim D={d} is not supported; this kernel takes {allowed}"


def padded(d: int, head_dims: tuple[int, ...] = HEAD_DIMS) -> int:
    """Return the smallest compiled head dim >= ``d``."""
    return next(h for h in head_dims if d <= h)


def prepare(who: str, q: torch.Tensor, k: torch.Tensor, causal: bool, scale: float | None,
            head_dims: tuple[int, ...] = HEAD_DIMS, pad: bool = True) -> tuple[torch.Tensor, tuple]:
    """Check the head dim, allocate the output and return it with the kernel's scalar arguments."""
    b, h, sq, d = q.shape
    why = head_dim_problem(who, d, head_dims, pad)
    require("attention", why is None, why.removeprefix("attention/") if why else "")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    out = empty_like(q)
    args = (np.int32(sq), np.int32(k.shape[2]), np.int32(d), np.float32(scale * LOG2E), np.int32(bool(causal)))
    return out, args


def cu_spec(cu: str, base: str, hd: int = 128, dtype: torch.dtype = torch.float16) -> dict:
    """Return what wb.inspect compiles: the (head dim, dtype) kernel of ``cu``, alone."""
    return {"kind": "cuda", "code": HERE / cu, "name": f"{base}_d{hd}_{SUFFIX[dtype]}", "options": only(hd, dtype)}


def _supports(shape: dict) -> str | None:
    return head_dim_problem("cuda_flash_simt", shape["D"])


@register("attention", "cuda_flash_simt", backend="cuda", cu_file=CU, supports=_supports,
          inspect_spec=lambda: cu_spec(CU, "attn_flash_simt"),
          idea="CUDA C FlashAttention in SIMT: Q tile in registers, K/V tiles in shared memory, online softmax, "
               "O(N) memory.")
def cuda_flash_simt(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    out, args = prepare("cuda_flash_simt", q, k, causal, scale)
    if out.numel() == 0:
        return out
    if k.shape[2] == 0:  # softmax over no keys, times an empty V: the reference gives zeros
        return out.zero_()
    fn = kernel(CU, padded(d), q.dtype, "attn_flash_simt")
    fn(((sq + BR - 1) // BR, b * h), (BR * G,), (to_raw(q), to_raw(k), to_raw(v), to_raw(out), *args))
    return out
