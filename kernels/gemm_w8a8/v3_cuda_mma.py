"""INT8 GEMM in CUDA C on the tensor cores: ``mma.sync.m16n8k32`` (s8 x s8 -> s32), GPU only.

``cu/w8a8_mma.cu``: 64x64 tiles of c per 4-warp block, each warp 2 x 4 fragments of 16x8, one ``mma.sync`` per
fragment per 32 values of K (512 multiply-adds per instruction, against ``__dp4a``'s 4). Both operands are
K-major, the layout the instruction's ``row.col`` form reads, so a fragment register is one 32-bit word of a row of
a or of b in shared memory. The epilogue is ``cuda_dp4a``'s: fp32, the two scales, one rounding to bf16.

cpu mode refuses it: the CPU engine cannot run inline PTX. tests/test_gemm_w8a8.py runs the same source with the
``mma.sync`` replaced by a C++ stand-in built from warp shuffles after the PTX ISA's fragment layout, which
checks the kernel's indexing, tiling, ragged edges and epilogue here; the instruction itself only on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import torch

from kernels._launch import cuda_spec
from workbench import register

from .reference import OP_NAME
from .v2_cuda_dp4a import launch

CU = "cu/w8a8_mma.cu"
CU_PATH = Path(__file__).parent / CU
TILE = 64


@register(OP_NAME, "cuda_mma", backend="cuda", cu_file=CU, gpu_only=True,
          gpu_note="inline PTX mma.sync (sm_80+), which the CPU engine cannot run; its logic is tested with a C++ "
                   "stand-in for the instruction",
          inspect_spec=lambda: cuda_spec(CU_PATH, "w8a8_mma", None),
          idea="Tensor cores: mma.sync m16n8k32 s8 -> s32 on K-major word fragments; 64x64 tiles, 4 warps.")
def cuda_mma(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return launch("w8a8_mma", a, b, scale_a, scale_b, path=CU_PATH, tile=TILE, block=(128,))
