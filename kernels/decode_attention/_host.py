"""What every decode_attention launcher shares: the output, the scale, the split count, the CUDA C launches.

Registers nothing. ``num_splits`` is the split-KV policy of ``cuda_split`` and ``triton_split`` (the page ranges
of each split come from :func:`kernels.decode_attention.reference.split_ranges`); :func:`cuda_launch` runs one
kernel of a ``cu/*.cu`` file for q's dtype with the arguments every decode kernel takes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype
from workbench import MODE, empty_like, register
from workbench.contracts import require
from workbench.interop import to_raw

from .reference import default_scale

CU = Path(__file__).parent / "cu"
MAX_D = 128  # the CUDA C kernels keep a head's row in registers: 4 columns per lane
# cpu mode: 2 splits, so the check's short sequences (1 to 5 pages) have full, ragged and empty splits (the
# Triton interpreter pays ~6 ms per split program).
CPU_SPLITS = 2


def start(q: torch.Tensor, scale: float | None) -> tuple[torch.Tensor, float]:
    """Return (out, scale): a fresh (poisoned under the checker) output like q and the softmax scale."""
    return empty_like(q), default_scale(q.shape[-1], scale)


def longest(seq_lens: torch.Tensor) -> int:
    """Return the longest sequence (one device sync)."""
    return int(seq_lens.max()) if seq_lens.numel() else 0


def num_splits(batch_heads: int, n_pages: int, *, sms: int = 132) -> int:
    """Return the splits per sequence: on a GPU enough (sequence, head) x split work items to give every SM two
    warps' worth, at most 16 and at most one page per split; in cpu mode ``CPU_SPLITS``."""
    if MODE != "gpu":
        return CPU_SPLITS
    want = -(-2 * sms * 4 // max(1, batch_heads))
    return max(1, min(16, want, n_pages))


def head_dim_problem(who: str, shape: dict) -> str | None:
    """Return why the CUDA C kernel ``who`` refuses the shape's head dim (None when it takes it)."""
    if shape["D"] <= MAX_D:
        return None
    return f"decode_attention/{who}: head dim D <= {MAX_D} (4 columns per lane in registers), got D={shape['D']}"


def spec(cu: str, base: str, dtype: torch.dtype = torch.float16) -> dict:
    """Return what wb.inspect compiles: ``base``'s instance for ``dtype`` in ``cu/<cu>``."""
    return cuda_spec(CU / cu, base, dtype, options=only_dtype(dtype))


def cuda_rung(name: str, cu: str, base: str, idea: str,
              supports: Callable[[dict], str | None] | None = None) -> Callable:
    """Return the decorator that registers the decode_attention CUDA C rung ``name`` whose kernel is ``base`` in
    ``cu/<cu>``: ``supports`` (default: the D <= 128 limit every such kernel has) and ``wb.inspect``'s spec."""
    return register("decode_attention", name, backend="cuda", cu_file=f"cu/{cu}", idea=idea,
                    supports=supports or (lambda shape: head_dim_problem(name, shape)),
                    inspect_spec=lambda: spec(cu, base))


def kernel(cu: str, base: str, dtype: torch.dtype) -> Any:
    """Return the compiled ``<base>_<dtype>`` kernel of ``cu/<cu>`` (NVRTC builds only that dtype on a GPU)."""
    return cuda_kernel(CU / cu, base, dtype, gpu_options=only_dtype(dtype))


def cuda_launch(cu: str, base: str, grid: tuple, block: int, q: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor, outs: tuple,
                scale: float, *, batch: bool = False) -> None:
    """Launch ``base`` with (q, k, v, table, lens, *outs, [B,] Hq, Hkv, D, page, maxp, scale)."""
    b, hq, d = q.shape
    require("decode_attention", d <= MAX_D, f"the CUDA C kernels take D <= {MAX_D}, got D={d}")
    ints = ([np.int32(b)] if batch else []) + [np.int32(hq), np.int32(k_cache.shape[2]), np.int32(d),
                                               np.int32(k_cache.shape[1]), np.int32(block_table.shape[1])]
    args = (to_raw(q), to_raw(k_cache), to_raw(v_cache), to_raw(block_table), to_raw(seq_lens),
            *(to_raw(o) for o in outs), *ints, np.float32(scale))
    kernel(cu, base, q.dtype)(grid, (block,), args)
