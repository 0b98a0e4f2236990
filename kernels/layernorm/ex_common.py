"""The given part of the layernorm exercise: the kernel around the learner's Welford merge, and its launch.

- layernorm-welford-merge (CUDA C): the learner writes ``__device__ void welford_merge(float& n, float& mean,
  float& m2, float nb, float mean_b, float m2b)`` as source text; the kernel that calls it, ``layernorm_welford_ex``
  (one warp per row, fp32), is :data:`WELFORD_KERNEL`, the text of ``ex_welford_kernel.cuh``, which the exercise's
  ``SOURCE`` appends to its own. :func:`welford_layernorm` compiles a source once per text and launches one block
  of 32 threads per row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import workbench as wb
from kernels._launch import learner_raw_kernel
from workbench.contracts import require
from workbench.interop import to_raw

from .reference import validate

WELFORD_KERNEL = (Path(__file__).parent / "ex_welford_kernel.cuh").read_text()  # after the learner's merge


def welford_layernorm(source: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Return layernorm(x, w, b, eps) from the ``layernorm_welford_ex`` kernel of ``source``: one warp per row."""
    kernel = learner_raw_kernel("welford_layernorm", source, "layernorm_welford_ex",
                                "your __device__ void welford_merge(...) followed by WELFORD_KERNEL (from "
                                "kernels.layernorm.ex_common)")
    validate(x, w, b, eps)
    require("layernorm", x.dtype == torch.float32,
            f"exercise layernorm-welford-merge: the given kernel (ex_welford_kernel.cuh) is float32 only, "
            f"got {x.dtype}")
    out = wb.empty_like(x)
    m, n = x.shape
    if out.numel():
        kernel((m,), (32,), (to_raw(x), to_raw(w), to_raw(b), to_raw(out), np.int32(n), np.float32(eps)))
    return out
