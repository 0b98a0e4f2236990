"""LayerNorm in CUDA C, one warp per row, Welford: per-lane (count, mean, M2) states merged by shuffles."""

from __future__ import annotations

import torch

from workbench import register

from ._host import spec, warp_per_row
from .reference import EPS

CU = "layernorm_welford.cu"


@register("layernorm", "cuda_welford", backend="cuda", cu_file=f"cu/{CU}",
          inspect_spec=lambda: spec(CU, "layernorm_welford"),
          idea="CUDA C: one warp per row; Welford per lane, 5 shuffle steps merge (n, mean, M2): one read for stats.")
def cuda_welford(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return warp_per_row(CU, "layernorm_welford", x, w, b, eps)
