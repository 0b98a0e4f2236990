"""Split-KV paged decode attention in CUDA C (flash-decoding): partial outputs per split, then a merge kernel.

``cu/decode_split.cu``: ``decode_split`` runs one warp per (split, sequence, query head) over that split's pages
(:func:`kernels.decode_attention.reference.split_ranges`) and writes an fp32 partial output and its log-sum-exp;
``decode_merge`` weights the partials by e^(lse_s - max lse) and skips empty splits. More warps in flight than
``cuda_warp`` when B * Hq is small and the sequences long, for one extra launch and S * B * Hq * D fp32 partials.
The merge kernel's own instances (``lse_merge_<dtype>``) are the lse_merge op's ``cuda_merge``.
"""

from __future__ import annotations

import numpy as np
import torch

from workbench import empty, empty_like, register
from workbench.interop import to_raw

from ._host import cuda_launch, cuda_rung, kernel, longest, num_splits, spec, start

CU = "cu/decode_split.cu"
WARPS = 4


def merge_launch(base: str, o: torch.Tensor, lse: torch.Tensor, out: torch.Tensor) -> None:
    """Run ``decode_split.cu``'s merge ``base`` (``decode_merge``: fp32 partials; ``lse_merge``: out's dtype)."""
    s, bh, d = o.shape[0], out.numel() // max(1, out.shape[-1]), out.shape[-1]
    kernel("decode_split.cu", base, out.dtype)((-(-bh // WARPS),), (32 * WARPS,),
                                               (to_raw(o), to_raw(lse), to_raw(out), np.int32(s), np.int32(bh),
                                                np.int32(d)))


@cuda_rung("cuda_split", "decode_split.cu", "decode_split",
           idea="CUDA C split-KV: a warp per (split, head) writes fp32 partials and their lse; a merge kernel sums.")
def cuda_split(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    out, sc = start(q, scale)
    if not out.numel():
        return out
    b, hq, d = q.shape
    s = num_splits(b * hq, -(-longest(seq_lens) // k_cache.shape[1]))
    o_part = empty((s, b, hq, d), torch.float32, q.device)
    lse = empty((s, b, hq), torch.float32, q.device)
    cuda_launch("decode_split.cu", "decode_split", (-(-hq // WARPS), b, s), 32 * WARPS, q, k_cache, v_cache,
                block_table, seq_lens, (o_part, lse), sc, batch=True)
    merge_launch("decode_merge", o_part, lse, out)
    return out


@register("lse_merge", "cuda_merge", backend="cuda", cu_file=CU,
          inspect_spec=lambda: spec("decode_split.cu", "lse_merge"),
          idea="CUDA C: one warp per (b, h); max lse, then the weighted sum of non-empty splits, lanes over D.")
def cuda_merge(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    out = empty_like(o[0]) if o.shape[0] else torch.zeros(o.shape[1:], dtype=o.dtype, device=o.device)
    if out.numel() and o.shape[0]:
        merge_launch("lse_merge", o, lse, out)
    return out
