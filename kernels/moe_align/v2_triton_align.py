"""MoE align-block-size in Triton: histogram, prefix sum of the padded counts, atomic scatter; three kernels.

Triton has no grid-wide barrier and no portable "last program" hand-off (its scalar atomics and its
intra-program ordering are not a memory-model contract one can lean on), so the CUDA C variant's one-kernel
count-and-scan becomes three launches plus a memset of the counts:

1. ``align_count_kernel`` (one program per BLOCK_N = 1024 slots): ``tl.histogram`` of the program's expert ids
   (BLOCK_E = next_power_of_2(E) bins, the tail masked), added to the global counts with one vector
   ``tl.atomic_add``; the program also fills its grid-stride share of sorted_ids with the sentinel n = T*top_k.
2. ``align_scan_kernel`` (one program per BLOCK_B row blocks): every program reloads the E counts (4 KiB at
   E = 1024, an L2 hit after the first), rounds them up to the block, ``tl.cumsum`` -> the group ends; the expert of
   row block b is the number of groups that end at or before row b*block (a [BLOCK_B, BLOCK_E] compare and row
   sum, no search), -1 past n_padded. Program 0 also writes n_padded and the write cursors (the group starts).
   Recomputing a 1024-long scan per program is cheaper than a fourth launch to share it.
3. ``align_scatter_kernel`` (one program per BLOCK_N slots): ``tl.atomic_add(cursor + expert, 1)`` returns each
   slot's position (every element of a vector atomic gets its own old value, duplicates included), then one store.

The order of slots within an expert's group depends on the atomics; the contract leaves it free.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe_align.reference import sizes
from workbench import empty, register

BLOCK_N = 1024  # slots per program in the count and scatter kernels
SCAN_TILE = 4096  # BLOCK_B * BLOCK_E compares per scan program
MAX_E = 1024  # the scan holds every expert's count in one program (like the CUDA C variant's one-block scan)


@triton.jit
def align_count_kernel(ids_ptr, counts_ptr, sorted_ptr, n, E, P, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    # Sentinel fill: program p writes chunks p, p + G, p + 2G, ... of sorted_ids (P can exceed n by E*(block-1)).
    step = tl.num_programs(0) * BLOCK_N
    for i0 in range(pid * BLOCK_N, P, step):
        j = i0 + tl.arange(0, BLOCK_N)
        tl.store(sorted_ptr + j, tl.full([BLOCK_N], 0, tl.int32) + n, mask=j < P)
    ok = offs < n
    e = tl.load(ids_ptr + offs, mask=ok, other=0)
    hist = tl.histogram(e, BLOCK_E, mask=ok)  # this program's counts per expert
    bins = tl.arange(0, BLOCK_E)
    tl.atomic_add(counts_ptr + bins, hist, mask=(bins < E) & (hist > 0), sem="relaxed")


@triton.jit
def align_scan_kernel(counts_ptr, cursor_ptr, expert_ids_ptr, n_padded_ptr, E, block, nb, BLOCK_E: tl.constexpr,
                      BLOCK_B: tl.constexpr):
    bins = tl.arange(0, BLOCK_E)
    c = tl.load(counts_ptr + bins, mask=bins < E, other=0)
    padded = (c + block - 1) // block * block
    end = tl.cumsum(padded, axis=0)  # inclusive: where each expert's group ends
    total = tl.sum(padded, axis=0)
    if tl.program_id(0) == 0:
        tl.store(cursor_ptr + bins, end - padded, mask=bins < E)  # exclusive: where each group starts
        tl.store(n_padded_ptr, total)
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    row = b * block
    # Groups ending at or before `row` (padding bins end at `total`, so they count only when row >= total).
    before = tl.sum(((end[None, :] <= row[:, None]) & (bins[None, :] < E)).to(tl.int32), axis=1)
    tl.store(expert_ids_ptr + b, tl.where(row < total, before, -1), mask=b < nb)


@triton.jit
def align_scatter_kernel(ids_ptr, cursor_ptr, sorted_ptr, n, BLOCK_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = offs < n
    e = tl.load(ids_ptr + offs, mask=ok, other=0)
    pos = tl.atomic_add(cursor_ptr + e, 1, mask=ok, sem="relaxed")  # each slot's own position in its group
    tl.store(sorted_ptr + pos, offs, mask=ok)


def scan_rows(e: int) -> tuple[int, int]:
    """Return (BLOCK_E, BLOCK_B) of the scan kernel for ``e`` experts: ~SCAN_TILE compares per program."""
    block_e = triton.next_power_of_2(e)
    return block_e, max(1, SCAN_TILE // block_e)


def _supports(shape: dict) -> str | None:
    if shape["E"] > MAX_E:
        return f"moe_align/triton_align scans the expert counts in one program: E <= {MAX_E}, got E={shape['E']}"
    return None


def _spec(which: str = "count", e: int = 256) -> dict:
    """Return the wb.inspect spec of kernel ``which`` ("count", "scan" or "scatter") for ``e`` experts."""
    block_e, block_b = scan_rows(e)
    if which == "count":
        return {"kind": "triton", "fn": align_count_kernel,
                "signature": {"ids_ptr": "*i32", "counts_ptr": "*i32", "sorted_ptr": "*i32", "n": "i32", "E": "i32",
                              "P": "i32"},
                "constexprs": {"BLOCK_N": BLOCK_N, "BLOCK_E": block_e}, "num_warps": 4, "num_stages": 1}
    if which == "scan":
        return {"kind": "triton", "fn": align_scan_kernel,
                "signature": {"counts_ptr": "*i32", "cursor_ptr": "*i32", "expert_ids_ptr": "*i32",
                              "n_padded_ptr": "*i32", "E": "i32", "block": "i32", "nb": "i32"},
                "constexprs": {"BLOCK_E": block_e, "BLOCK_B": block_b}, "num_warps": 4, "num_stages": 1}
    return {"kind": "triton", "fn": align_scatter_kernel,
            "signature": {"ids_ptr": "*i32", "cursor_ptr": "*i32", "sorted_ptr": "*i32", "n": "i32"},
            "constexprs": {"BLOCK_N": BLOCK_N}, "num_warps": 4, "num_stages": 1}


def run(topk_ids: torch.Tensor, E: int, block: int, scan=align_scan_kernel  # noqa: N803
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run count, ``scan`` and scatter; the known-wrong variant passes its own scan kernel."""
    t, k = topk_ids.shape
    n = t * k
    p, nb = sizes(t, k, E, block)
    dev = topk_ids.device
    sorted_ids = empty((p,), torch.int32, dev)
    expert_ids = empty((nb,), torch.int32, dev)
    n_padded = empty((1,), torch.int32, dev)
    counts = torch.zeros(E, dtype=torch.int32, device=dev)  # the memset: the histograms accumulate into it
    cursor = torch.empty(E, dtype=torch.int32, device=dev)  # written by the scan before the scatter reads it
    block_e, block_b = scan_rows(E)
    grid_n = max(1, triton.cdiv(n, BLOCK_N))
    align_count_kernel[(grid_n,)](topk_ids, counts, sorted_ids, n, E, p, BLOCK_N=BLOCK_N, BLOCK_E=block_e)
    scan[(max(1, triton.cdiv(nb, block_b)),)](counts, cursor, expert_ids, n_padded, E, block, nb, BLOCK_E=block_e,
                                              BLOCK_B=block_b)
    if n:
        align_scatter_kernel[(grid_n,)](topk_ids, cursor, sorted_ids, n, BLOCK_N=BLOCK_N)
    return sorted_ids, expert_ids, n_padded


@register("moe_align", "triton_align", backend="triton", supports=_supports, inspect_spec=_spec,
          idea="Triton: tl.histogram + atomic counts, per-program tl.cumsum of padded counts, tl.atomic_add "
               "cursors for the scatter.")
def triton_align(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(topk_ids, E, block)
