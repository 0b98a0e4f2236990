"""LayerNorm in CUDA C, one warp per row, two passes: warp_sum of x (the mean), then of (x - mean)^2."""

from __future__ import annotations

import torch

from workbench import register

from ._host import spec, warp_per_row
from .reference import EPS

CU = "layernorm_warp.cu"


@register("layernorm", "cuda_warp", backend="cuda", cu_file=f"cu/{CU}", inspect_spec=lambda: spec(CU, "layernorm_warp"),
          idea="CUDA C: one warp per row; warp_sum of x, then of (x - mean)^2 (two passes), then y: three sweeps.")
def cuda_warp(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return warp_per_row(CU, "layernorm_warp", x, w, b, eps)
