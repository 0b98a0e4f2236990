"""Routing and alignment the fused MoE pipelines share (``moe/triton_fused``, ``moe_fp8/triton_block``).

Registers nothing. Both pipelines route with ``moe_topk``'s Triton kernel and sort the routed slots by expert with
``moe_align``'s, then run their grouped GEMMs over the aligned row blocks; what they share is here: the checks of
routed tokens, the alignment launch, and a ``supports`` that refuses what those two kernels refuse.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels.moe_align import v2_triton_align
from kernels.moe_align.reference import sizes as align_sizes
from kernels.moe_topk.v2_triton_topk import triton_topk
from workbench import OpError


def check_routed(who: str, t: int, topk_weights: torch.Tensor, topk_ids: torch.Tensor, block_m: int) -> int:
    """Check routed tokens (weights and ids both [T, top_k]) and the align block for ``who``; return block_m."""
    k = topk_ids.shape[1]
    if tuple(topk_weights.shape) != (t, k) or tuple(topk_ids.shape) != (t, k):
        raise OpError(f"{who}: topk_weights and topk_ids must both be [T, top_k] = [{t}, {k}], got "
                      f"{tuple(topk_weights.shape)} and {tuple(topk_ids.shape)}")
    bm = int(block_m)
    if bm < 16 or bm % 16:
        raise OpError(f"{who}: block_m must be a multiple of 16 (tl.dot's smallest M), got {bm}")
    return bm


def align_routed(topk_weights: torch.Tensor, topk_ids: torch.Tensor, e: int, block_m: int
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (weights fp32, sorted_ids, expert_ids, n_padded): the routed slots aligned to block_m rows."""
    t, k = topk_ids.shape
    ids = topk_ids.to(torch.int32).contiguous()
    weights = topk_weights.to(torch.float32).contiguous()
    # The launcher itself, not the registered variant: that one validates topk_ids against E with a min/max that
    # syncs with the host, and the pipeline is meant to run without one (CUDA-graph friendly).
    sorted_ids, expert_ids, n_padded = v2_triton_align.run(ids, e, block_m)
    assert expert_ids.shape[0] == align_sizes(t, k, e, block_m)[1], "moe_align returned a block count off its contract"
    return weights, sorted_ids, expert_ids, n_padded


def routing_supports(who: str) -> Callable[[dict], str | None]:
    """Return a ``supports`` for variant ``who`` that routes with the Triton top-k and align kernels.

    It refuses what they refuse (E beyond one program's row or scan), naming ``who`` and the kernel.
    """
    def supports(shape: dict) -> str | None:
        for v in (triton_topk, v2_triton_align.triton_align):
            why = v.supports(shape) if v.supports is not None else None
            if why:
                return f"{who} routes with {v.op}/{v.name}, which refuses this shape: {why}"
        return None

    return supports


def route(router_logits: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (weights [T, top_k] fp32, ids [T, top_k] int32) from the Triton top-k kernel, without the checks."""
    return triton_topk.fn(router_logits, top_k, renormalize)
