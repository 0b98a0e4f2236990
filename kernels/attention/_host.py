"""What every attention launcher does before its kernel: the output, the empty cases, the softmax scale.

Registers nothing: the Numba and CUDA C launchers (``v1_numba_naive``, ``v2_numba_flash``, ``_cuda``) call it.
"""

from __future__ import annotations

import math

import torch

from workbench import empty_like


def start(q: torch.Tensor, k: torch.Tensor, scale: float | None) -> tuple[torch.Tensor, float | None]:
    """Return (out, scale): a fresh output like ``q`` and the softmax scale (default 1/sqrt(D)).

    The scale is None when ``out`` is already the answer: an empty output, or no keys (softmax over no keys times
    an empty V: the reference gives zeros).
    """
    out = empty_like(q)
    if out.numel() == 0:
        return out, None
    if k.shape[2] == 0:
        return out.zero_(), None
    return out, 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def rows_3d(*ts: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Return each [B, H, S, D] tensor viewed as [B*H, S, D] (one grid row per batch-head)."""
    return tuple(t.view(-1, t.shape[2], t.shape[3]) for t in ts)
