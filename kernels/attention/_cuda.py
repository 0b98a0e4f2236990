"""Launch the FlashAttention CUDA C kernels (SIMT, wmma, mma.sync): one extern "C" instance per (head dim, dtype).

Registers nothing: ``v3_cuda_flash_simt``, ``v4_cuda_flash_wmma`` and ``v5_cuda_flash_mma`` call it. A ``.cu`` file
``<base>.cu`` exports ``<base>_d<HD>_<f32|f16|bf16>`` with HD in {16, 32, 64, 128} (``WB_EACH_HEAD_DIM``); D is
zero-padded up to the next HD, so any head dim 1 <= D <= 128 runs. On a GPU NVRTC compiles only the (head dim,
dtype) instance a launch needs (all twelve of a file take ~20 s); the CPU engine builds the whole file once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, is_aligned, only_dtype
from kernels.attention._host import start
from workbench.contracts import require
from workbench.interop import to_raw

HERE = Path(__file__).parent
HEAD_DIMS = (16, 32, 64, 128)  # compiled (padded) head dims
LOG2E = 1.4426950408889634  # the kernels use exp2f: exp(x) = 2^(x * log2(e))


def only(hd: int, dtype: torch.dtype) -> tuple[str, ...]:
    """Return the options that compile just the (head dim, dtype) kernel of an attention .cu file."""
    return (f"-DWB_ONLY_HD={hd}", *only_dtype(dtype))


def padded(d: int) -> int:
    """Return the smallest compiled head dim >= ``d``."""
    return next(h for h in HEAD_DIMS if d <= h)


def head_dim_problem(who: str, d: int) -> str | None:
    """Return why head dim ``d`` is not supported by variant ``who`` (None when it is)."""
    if 1 <= d <= HEAD_DIMS[-1]:
        return None
    return (f"attention/{who}: head dim D={d} is not supported; this kernel takes 1 <= D <= {HEAD_DIMS[-1]} "
            f"(padded to {', '.join(map(str, HEAD_DIMS))})")


def supports(who: str) -> Callable[[dict], str | None]:
    """Return variant ``who``'s ``supports``: the head-dim rule."""
    return lambda shape: head_dim_problem(who, shape["D"])


def spec(base: str, hd: int = 128, dtype: torch.dtype = torch.float16) -> dict:
    """Return what wb.inspect compiles: the (head dim, dtype) kernel of ``<base>.cu``, alone."""
    return cuda_spec(HERE / f"{base}.cu", f"{base}_d{hd}", dtype, options=only(hd, dtype))


def launch(base: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None, *,
           rows: int, threads: int, vec: bool = False) -> torch.Tensor:
    """Run ``<base>.cu``'s kernel for q's padded head dim and dtype: ``rows`` query rows per block of ``threads``.

    ``vec`` appends the kernel's last argument: whether rows may be copied in 16-byte chunks (D % 8 == 0 and
    16-byte aligned q, k, v).
    """
    b, h, sq, d = q.shape
    sk = k.shape[2]
    why = head_dim_problem(base.replace("attn_flash", "cuda_flash"), d)
    require("attention", why is None, why.removeprefix("attention/") if why else "")
    out, scale = start(q, k, scale)
    if scale is None:
        return out
    args = [to_raw(q), to_raw(k), to_raw(v), to_raw(out), np.int32(sq), np.int32(sk), np.int32(d),
            np.float32(scale * LOG2E), np.int32(bool(causal))]
    if vec:
        args.append(np.int32(d % 8 == 0 and is_aligned(q, k, v)))
    hd = padded(d)
    kernel = cuda_kernel(HERE / f"{base}.cu", f"{base}_d{hd}", q.dtype, gpu_options=only(hd, q.dtype))
    kernel(((sq + rows - 1) // rows, b * h), (threads,), tuple(args))
    return out
