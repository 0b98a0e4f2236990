"""Softmax in Triton, autotuned: rows per program and warps for short rows, chunk size for long rows."""

from __future__ import annotations

import torch
import triton

from kernels._launch import triton_spec, tuned
from workbench import empty_like, register

from .v9_triton_fused import softmax_fused_kernel
from .v10_triton_online import softmax_online_kernel

FUSED_MAX_N = 2**14  # up to 16K elements the fused kernel wins; beyond, the looped one
FUSED_CONFIGS = [triton.Config({"ROWS": r}, num_warps=w) for r in (1, 2, 4, 8, 16) for w in (4, 8, 16)]
ONLINE_CONFIGS = [triton.Config({"BLOCK_N": b}, num_warps=w, num_stages=s)
                  for b in (2048, 4096, 8192) for w in (4, 8, 16) for s in (2, 3)]


def _prune_fused(configs: list, named_args: dict, **kw) -> list:
    keep = [c for c in configs if c.kwargs["ROWS"] * kw["BLOCK_N"] <= 16384]  # <= 64 KB of fp32 per program
    return keep or configs[:1]


# On a GPU the autotuner times every config once per N; in cpu mode the interpreter's times say nothing about a GPU,
# so the first config of each list runs alone.
_fused = tuned(softmax_fused_kernel, FUSED_CONFIGS, cpu_config=FUSED_CONFIGS[0], key=["N"], prune=_prune_fused)
_online = tuned(softmax_online_kernel, ONLINE_CONFIGS, cpu_config=ONLINE_CONFIGS[0], key=["N"])


def _spec() -> dict:
    return triton_spec(softmax_fused_kernel, ROWS=4, BLOCK_N=4096, num_warps=8, num_stages=1)


@register("softmax", "triton_autotuned", backend="triton", inspect_spec=_spec,
          idea="Triton autotuned on N: fused rows (ROWS x warps) up to 16K, looped online (chunk x warps) beyond.")
def triton_autotuned(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = empty_like(x)
    if out.numel() == 0:  # M or N is 0: an empty result, as torch gives
        return out
    if n <= FUSED_MAX_N:
        _fused[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](x, out, m, n, BLOCK_N=triton.next_power_of_2(n))
    else:
        _online[(m,)](x, out, n)
    return out
