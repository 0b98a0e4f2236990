"""MoE align-block-size in CUDA C: shared-memory histograms, a last-block prefix sum, an atomic scatter.

The kernels live in ``moe_align.cu``. ``moe_align_count`` (G blocks of 256 threads) fills sorted_ids with the
sentinel, histograms its share of the slots in shared memory and adds it to global counts; the block that finishes
last (a ticket counter) scans the padded counts, writes n_padded, expert_ids and the per-expert cursors.
``moe_align_scatter`` then places every slot with a warp-aggregated atomicAdd on its expert's cursor. Up to
``SLOTS_PER_BLOCK`` slots (decode batches) one block does all of it in one launch, cursors in shared memory.

Launches: 1 when n = T*top_k <= 4096, else 3 (a 4(2E+1)-byte memset of the counts and ticket, count, scatter).
The order of slots within an expert's group depends on the atomics; the contract leaves it free.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec
from kernels.moe_align.reference import empty_outputs
from workbench import register
from workbench.interop import to_raw

CU = Path(__file__).with_name("moe_align.cu")
THREADS = 256  # the .cu file's THREADS
MAX_E = 1024  # the .cu file's MAX_E: counts + prefix-sum tables in 8 KiB of shared memory, one block's scan
SLOTS_PER_BLOCK = 4096  # 16 slots per thread; at or below it a single block does everything in one launch
MAX_BLOCKS = 264  # 2 blocks per SM of an H200 (132 SMs): the grid-stride loops cover the rest


def grid_for(n: int) -> int:
    """Return the number of blocks for ``n`` slots: 1 up to SLOTS_PER_BLOCK, then one per SLOTS_PER_BLOCK."""
    return max(1, min(MAX_BLOCKS, -(-n // SLOTS_PER_BLOCK)))


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return f"moe_align/cuda_align scans the expert counts in one block's shared memory: E <= {MAX_E}, got " \
               f"E={shape['E']}"
    return None


def _spec(name: str = "moe_align_count") -> dict:
    """Return what wb.inspect compiles: ``moe_align_count`` (default) or ``moe_align_scatter``."""
    return cuda_spec(CU, name, None)


@register("moe_align", "cuda_align", backend="cuda", cu_file=CU.name, supports=_supports, inspect_spec=_spec,
          idea="CUDA C: shared-memory histograms, last-block prefix sum of padded counts, warp-aggregated "
               "atomic scatter.")
def cuda_align(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = topk_ids.numel()
    sorted_ids, expert_ids, n_padded = empty_outputs(topk_ids, E, block)
    p, dev = sorted_ids.numel(), topk_ids.device
    g = grid_for(n)
    if g > 1:  # workspace [counts E | ticket 1 | cursor E]: the counts and the ticket must start at zero (the memset)
        ws = torch.zeros(2 * E + 1, dtype=torch.int32, device=dev)
        counts, ticket, cursor = ws[:E], ws[E:E + 1], ws[E + 1:]
    else:  # one block needs no workspace: the pointers are never read, any int32 buffer will do
        counts = ticket = cursor = n_padded
    count, scatter = cuda_kernel(CU, "moe_align_count"), cuda_kernel(CU, "moe_align_scatter")
    ids = to_raw(topk_ids)
    count((g,), (THREADS,), (ids, np.int32(n), np.int32(E), np.int32(block), np.int32(p), to_raw(sorted_ids),
                             to_raw(expert_ids), to_raw(n_padded), to_raw(counts), to_raw(ticket), to_raw(cursor)))
    if g > 1:
        scatter((g,), (THREADS,), (ids, np.int32(n), to_raw(cursor), to_raw(sorted_ids)))
    return sorted_ids, expert_ids, n_padded
