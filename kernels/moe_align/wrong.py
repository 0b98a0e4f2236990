"""Known-wrong moe_align kernel: the Triton variant with its prefix sum over the raw counts, for the checker to name.

``wrong_unpadded`` forgets to round each expert's count up to a whole block before the prefix sum: the groups are
packed back to back, so one row block of the grouped GEMM straddles two experts (and gets the first one's weights
for all of its rows), expert_ids is read at the wrong row offsets, n_padded is T*top_k. The count and scatter
kernels are ``triton_align``'s; only the scan kernel below differs, by the one marked line.

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
def align_scan_unpadded_kernel(counts_ptr, cursor_ptr, expert_ids_ptr, n_padded_ptr, E, block, nb,
                               BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    bins = tl.arange(0, BLOCK_E)
    c = tl.load(counts_ptr + bins, mask=bins < E, other=0)
    padded = c  # BUG: should be (c + block - 1) // block * block
    end = tl.cumsum(padded, axis=0)
    total = tl.sum(padded, axis=0)
    if tl.program_id(0) == 0:
        tl.store(cursor_ptr + bins, end - padded, mask=bins < E)
        tl.store(n_padded_ptr, total)
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    row = b * block
    before = tl.sum(((end[None, :] <= row[:, None]) & (bins[None, :] < E)).to(tl.int32), axis=1)
    tl.store(expert_ids_ptr + b, tl.where(row < total, before, -1), mask=b < nb)


@register("moe_align", "wrong_unpadded", backend="triton", expected_diagnosis="scattered",
          idea="KNOWN WRONG: prefix sum over the raw counts, so expert groups are not padded to whole blocks.")
def wrong_unpadded(topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(topk_ids, E, block, scan=align_scan_unpadded_kernel)
