"""Known-wrong moe_align kernel: the Triton variant with a prefix sum over the raw counts, for the checker to name.

``wrong_unpadded`` forgets to round each expert's count up to a whole block before the prefix sum: the groups are
packed back to back, so one row block of the grouped GEMM straddles two experts (and gets the first one's weights
for all of its rows), expert_ids is read at the wrong row offsets, n_padded is T*top_k. The count and scatter
kernel and the launches are ``triton_align``'s; the place kernel below differs from its by the one marked line.

What the checker says, honestly: ``scattered``. sorted_ids is compared first, and where the groups start sooner
every slot after the first expert's group moves, so the wrong entries are spread over the whole array with no tail
or tile pattern. With block = 1 there is nothing to round and the kernel passes (the check shape T=5, E=4).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.moe_align.v2_triton_align import run
from workbench import register


@triton.jit
def align_place_unpadded_kernel(ids_ptr, counts_ptr, fill_ptr, sorted_ptr, expert_ids_ptr, n_padded_ptr, n, E, block,
                                nb, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    pid = tl.program_id(0)
    bins = tl.arange(0, BLOCK_E)
    c = tl.load(counts_ptr + bins, mask=bins < E, other=0)
    padded = c  # BUG: should be (c + block - 1) // block * block
    end = tl.cumsum(padded, axis=0)
    start = end - padded
    total = tl.sum(padded, axis=0)
    if pid == 0:
        tl.store(n_padded_ptr, total)
    b = pid * BLOCK_B + tl.arange(0, BLOCK_B)
    row = b * block
    before = tl.sum(((end[None, :] <= row[:, None]) & (bins[None, :] < E)).to(tl.int32), axis=1)
    tl.store(expert_ids_ptr + b, tl.where(row < total, before, -1), mask=b < nb)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = offs < n
    e = tl.load(ids_ptr + offs, mask=ok, other=0)
    rank = tl.atomic_add(fill_ptr + e, 1, mask=ok, sem="relaxed")
    tl.store(sorted_ptr + tl.gather(start, e, 0) + rank, offs, mask=ok)


@register("moe_align", "wrong_unpadded", backend="triton", expected_diagnosis="scattered",
          idea="KNOWN WRONG: prefix sum over the raw counts, so expert groups are not padded to whole blocks.")
def wrong_unpadded(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(topk_ids, E, block, place=align_place_unpadded_kernel)
