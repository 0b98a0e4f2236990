"""LayerNorm backward in CUDA C, dw/db in two stages without atomics: the deterministic reduction of
``triton_two_stage`` written llm.c-style (layernorm_bwd.cu: warp per row for the row sums, thread per column for
dx and the per-block partials, then a column-sum kernel)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype
from workbench import empty, empty_like, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("layernorm_bwd.cu")
ROWS_PER_CTA = 32  # as layernorm_bwd.cu's constant
THREADS = 128  # 4 warps: layernorm_bwd.cu's WARPS
SUM_THREADS = 256


@register("layernorm_bwd", "cuda_two_stage", backend="cuda", cu_file="layernorm_bwd.cu", deterministic=True,
          inspect_spec=lambda: cuda_spec(CU, "ln_bwd_partials", torch.bfloat16, options=only_dtype(torch.bfloat16)),
          idea="CUDA C: warp per row for the row sums, thread per column for dx and per-block partials, column sum.")
def cuda_two_stage(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    ctas = -(-m // ROWS_PER_CTA)
    dx, dw, db = empty_like(x), empty_like(w), empty_like(w)
    dw_part = empty((max(ctas, 1), n), torch.float32, x.device)
    db_part = empty((max(ctas, 1), n), torch.float32, x.device)
    opts = only_dtype(x.dtype)
    if ctas:
        cuda_kernel(CU, "ln_bwd_partials", x.dtype, gpu_options=opts)(
            (ctas,), (THREADS,), (to_raw(dy), to_raw(x), to_raw(w), to_raw(mean), to_raw(rstd), to_raw(dx),
                                  to_raw(dw_part), to_raw(db_part), np.int32(m), np.int32(n)))
    cuda_kernel(CU, "ln_bwd_colsum", x.dtype, gpu_options=opts)(
        (-(-n // SUM_THREADS),), (SUM_THREADS,), (to_raw(dw_part), to_raw(db_part), to_raw(dw), to_raw(db),
                                                  np.int32(ctas), np.int32(n)))
    return dx, dw, db
