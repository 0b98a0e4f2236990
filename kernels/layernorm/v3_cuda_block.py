"""LayerNorm in CUDA C, one block per row for wide rows: two passes, each reduced with block_sum."""

from __future__ import annotations

import torch

from workbench import register

from ._host import block_per_row, spec
from .reference import EPS

CU = "layernorm_block.cu"


@register("layernorm", "cuda_block", backend="cuda", cu_file=f"cu/{CU}",
          inspect_spec=lambda: spec(CU, "layernorm_block"),
          idea="CUDA C: one block per row (threads from the arch table); block_sum of x, then of (x - mean)^2.")
def cuda_block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return block_per_row(CU, "layernorm_block", x, w, b, eps)
