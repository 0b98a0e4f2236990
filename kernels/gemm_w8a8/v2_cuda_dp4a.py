"""INT8 GEMM in CUDA C on the CUDA cores: ``__dp4a`` sums four int8 products into an int32 per instruction.

``cu/w8a8_dp4a.cu``: 32x32 tiles of c per 256-thread block, each thread a 2x2 register block; the shared tiles
hold 32-bit words of four K-neighbouring int8 values, so one ``__dp4a`` consumes a whole word of a and of b. The
host flag ``vec`` (K % 4 == 0 and 4-byte aligned rows) picks one 4-byte load per word; ragged K packs the word from
guarded byte loads. The epilogue converts the exact int32 sum to fp32, multiplies by ``scale_a[row]`` and
``scale_b[col]`` and rounds to bf16 once. dp4a is what int8 inference ran on before int8 tensor cores (Pascal
sm_61 onwards): 4 multiply-adds per instruction per thread, where one ``mma.sync.m16n8k32`` (``cuda_mma``) does
16 * 8 * 32 = 4,096 per warp. On a GPU the kernel runs through cupy; in cpu mode on the CPU engine, whose
``__dp4a`` is four byte products added to the int32 in C++.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, is_aligned
from workbench import empty, register
from workbench.interop import to_raw

from .reference import OP_NAME

CU = "cu/w8a8_dp4a.cu"
CU_PATH = Path(__file__).parent / CU
TILE = 32


def launch(name: str, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
           path: Path = CU_PATH, tile: int = TILE, block: tuple[int, ...] = (16, 16)) -> torch.Tensor:
    """Return c from ``path``'s kernel ``name`` over ceil(N/tile) x ceil(M/tile) blocks of ``block`` threads."""
    m, k = a.shape
    n = b.shape[0]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0:  # a grid of 0 blocks is a launch error: an empty result, as torch gives
        return c
    vec = int(k % 4 == 0 and is_aligned(a, b, nbytes=4))
    grid = ((n + tile - 1) // tile, (m + tile - 1) // tile)
    args = (to_raw(a), to_raw(b), to_raw(scale_a), to_raw(scale_b), to_raw(c), np.int32(m), np.int32(n),
            np.int32(k), np.int32(vec))
    cuda_kernel(path, name)(grid, block, args)
    return c


@register(OP_NAME, "cuda_dp4a", backend="cuda", cu_file=CU, inspect_spec=lambda: cuda_spec(CU_PATH, "w8a8_dp4a", None),
          idea="CUDA cores: __dp4a adds four int8 products to an int32 per instruction; 2x2 outputs per thread.")
def cuda_dp4a(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return launch("w8a8_dp4a", a, b, scale_a, scale_b)
