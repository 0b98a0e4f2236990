"""MoE align-block-size in Triton: histogram, prefix sum of the padded counts, atomic scatter; two kernels.

Triton has no grid-wide barrier and no portable "last program" hand-off (its scalar atomics and its
intra-program ordering are not a memory-model contract one can lean on), so the CUDA C variant's ticket becomes
a kernel boundary, and instead of a scan kernel every program of the second kernel redoes the scan:

1. ``align_count_kernel`` (one program per BLOCK_N = 1024 slots): ``tl.histogram`` of the program's expert ids
   (BLOCK_E = next_power_of_2(E) bins, the tail masked), added to the global counts with one vector
   ``tl.atomic_add``; the program also fills its grid-stride share of sorted_ids with the sentinel n = T*top_k.
2. ``align_place_kernel`` (max(n / BLOCK_N, n_blocks / BLOCK_B) programs): every program reloads the E counts
   (4 KiB at E = 1024, L2 hits after the first program), rounds them up to the block and takes their ``tl.cumsum``:
   the group ends. Recomputing a <= 1024-long scan per program costs less than a third launch to share it. Then
   - row blocks: the expert of row block b is the number of groups that end at or before row b*block (a
     [BLOCK_B, BLOCK_E] compare and row sum, no search), -1 past n_padded; program 0 writes n_padded;
   - slots: ``tl.atomic_add(fill + expert, 1)`` gives each slot its rank in its group (every element of a vector
     atomic gets its own old value, duplicates included) and ``tl.gather`` of the group starts places it.

Launches: a memset of [counts | fill] (8E bytes), count, place. The order of slots within an expert's group
depends on the atomics; the contract leaves it free. ptxas (sm_90, E = 256, 4 warps, no spills): count 55
registers and 1 KiB of shared memory (the histogram), place 47 registers and 8 KiB (the gather's and the atomic
results' layout conversions).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from kernels.moe_align.reference import empty_outputs
from workbench import MODE, register

BLOCK_N = 1024  # slots per program
# Compares per program in the row-block search: [BLOCK_B, BLOCK_E]. The interpreter's cost is per tl op, not per
# element, so cpu mode takes 16x bigger tiles (E = 1024, block = 8: 15 programs instead of 232).
GPU_SCAN_TILE = 4096  # [16, 256] at E = 256: 32 compares per thread at 4 warps
SCAN_TILE = GPU_SCAN_TILE if MODE == "gpu" else 65536
MAX_E = 1024  # the scan holds every expert's count in one program (like the CUDA C variant's one-block scan)


@triton.jit
def align_count_kernel(ids_ptr, counts_ptr, sorted_ptr, n, E, P, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    # Sentinel fill: program p writes chunks p, p + G, p + 2G, ... of sorted_ids (P can exceed n by E*(block-1)).
    step = tl.num_programs(0) * BLOCK_N
    for i0 in range(pid * BLOCK_N, P, step):
        j = i0 + tl.arange(0, BLOCK_N)
        tl.store(sorted_ptr + j, tl.full([BLOCK_N], 0, tl.int32) + n, mask=j < P)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = offs < n
    e = tl.load(ids_ptr + offs, mask=ok, other=0)
    hist = tl.histogram(e, BLOCK_E, mask=ok)  # this program's counts per expert
    bins = tl.arange(0, BLOCK_E)
    tl.atomic_add(counts_ptr + bins, hist, mask=(bins < E) & (hist > 0), sem="relaxed")


@triton.jit
def align_place_kernel(ids_ptr, counts_ptr, fill_ptr, sorted_ptr, expert_ids_ptr, n_padded_ptr, n, E, block, nb,
                       BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    pid = tl.program_id(0)
    bins = tl.arange(0, BLOCK_E)
    c = tl.load(counts_ptr + bins, mask=bins < E, other=0)
    padded = (c + block - 1) // block * block
    end = tl.cumsum(padded, axis=0)  # inclusive: where each expert's group ends
    start = end - padded  # exclusive: where it starts
    total = tl.sum(padded, axis=0)
    if pid == 0:
        tl.store(n_padded_ptr, total)
    # Row blocks: groups ending at or before `row` (padding bins end at `total`: they count only past n_padded).
    b = pid * BLOCK_B + tl.arange(0, BLOCK_B)
    row = b * block
    before = tl.sum(((end[None, :] <= row[:, None]) & (bins[None, :] < E)).to(tl.int32), axis=1)
    tl.store(expert_ids_ptr + b, tl.where(row < total, before, -1), mask=b < nb)
    # Slots: rank within the group from the atomic, the group's start from the scan.
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = offs < n
    e = tl.load(ids_ptr + offs, mask=ok, other=0)
    rank = tl.atomic_add(fill_ptr + e, 1, mask=ok, sem="relaxed")
    tl.store(sorted_ptr + tl.gather(start, e, 0) + rank, offs, mask=ok)


def tiles(e: int, scan_tile: int | None = None) -> tuple[int, int]:
    """Return (BLOCK_E, BLOCK_B) for ``e`` experts: all experts in one vector, ~``scan_tile`` compares per program
    (default: this mode's SCAN_TILE)."""
    block_e = triton.next_power_of_2(e)
    return block_e, max(1, (scan_tile or SCAN_TILE) // block_e)


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return f"moe_align/triton_align scans the expert counts in one program: E <= {MAX_E}, got E={shape['E']}"
    return None


def _spec(which: str = "place", e: int = 256) -> dict:
    """Return the wb.inspect spec (GPU tiles) of kernel ``which``, "count" or "place" (default), for ``e`` experts."""
    block_e, block_b = tiles(e, GPU_SCAN_TILE)
    if which == "count":
        return triton_spec(align_count_kernel, torch.int32, BLOCK_N=BLOCK_N, BLOCK_E=block_e, num_stages=1)
    return triton_spec(align_place_kernel, torch.int32, BLOCK_N=BLOCK_N, BLOCK_E=block_e, BLOCK_B=block_b,
                       num_stages=1)


def run(topk_ids: torch.Tensor, E: int, block: int, place=align_place_kernel  # noqa: N803
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run the count and ``place`` kernels (the known-wrong variant passes its own place kernel)."""
    n = topk_ids.numel()
    sorted_ids, expert_ids, n_padded = empty_outputs(topk_ids, E, block)
    p, nb, dev = sorted_ids.numel(), expert_ids.numel(), topk_ids.device
    ws = torch.zeros(2 * E, dtype=torch.int32, device=dev)  # the memset: [counts | fill] are accumulated into
    counts, fill = ws[:E], ws[E:]
    block_e, block_b = tiles(E)
    align_count_kernel[(max(1, triton.cdiv(n, BLOCK_N)),)](topk_ids, counts, sorted_ids, n, E, p, BLOCK_N=BLOCK_N,
                                                            BLOCK_E=block_e)
    grid = max(1, triton.cdiv(n, BLOCK_N), triton.cdiv(nb, block_b))
    place[(grid,)](topk_ids, counts, fill, sorted_ids, expert_ids, n_padded, n, E, block, nb, BLOCK_N=BLOCK_N,
                   BLOCK_E=block_e, BLOCK_B=block_b)
    return sorted_ids, expert_ids, n_padded


@register("moe_align", "triton_align", backend="triton", supports=_supports, inspect_spec=_spec,
          idea="Triton: tl.histogram + atomic counts, then per program: tl.cumsum of the padded counts, row-block "
               "experts, atomic ranks + tl.gather of the group starts.")
def triton_align(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(topk_ids, E, block)
