"""Split-KV paged decode attention in Triton with a GQA group's query heads packed into ``tl.dot``'s M dimension.

``triton_split`` computes each page's scores by broadcast-multiply-and-sum: decode has one query row per head, and
``tl.dot`` (an MMA on tensor cores) wants M >= 16 rows. But the GROUP = Hq / Hkv query heads that read one KV head
all meet the same K and V tiles: stacked, they are a [GROUP, D] matrix, and a page's scores for the whole group are
one matrix product [GROUP, PAGE] = Q K^T, then the output update one more, acc += P V. ``gqa_dot_kernel`` pads the
group to GP = max(16, GROUP) rows (Llama-3-8B's group of 4 fills a quarter of them; the padding rows' q is 0 and
they are never stored), and the page and head dims to at least 16 (tl.dot's N and K). Everything else is
``split_kernel``'s: one program per (sequence, KV head, split), the same block-table gather (``page_rows``), the same
online softmax (``softmax_fold``), partial outputs and lse per split (``store_split``) and the same merge.

q, K and V go into the dots in their own dtype (fp16/bf16: tensor cores, fp32 accumulators; fp32: a true fp32
``input_precision="ieee"`` dot, no TF32), the scale is applied to the fp32 scores, and P is rounded to V's dtype for
the second dot, as FlashAttention does. Decode stays memory-bound either way (about one FLOP per byte of KV per
group member): the dot saves the CUDA-core FMAs and registers of the broadcast product, which matters once the
group is large (GQA 8, or MQA's 32+) or several query tokens per sequence share the cache (speculative decoding),
the regime FlashMLA's note puts at h_q * s_q >= 128. Under the interpreter (cpu mode) bf16 dots are refused
(the interpreter's bf16 ``tl.dot`` is garbage): fp32 and fp16 run there.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import dot_precision, triton_spec, tuned
from workbench import empty_like, register

from ._host import CPU_SPLITS
from .v6_triton_split import (
    MAX_SPLITS,
    load_q,
    load_rows,
    merge,
    page_rows,
    softmax_fold,
    softmax_start,
    split_of,
    split_partials,
    store_split,
)

DOT_MIN = 16  # tl.dot's least M, N and K


@triton.jit
def gqa_dot_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, B, Hq, Hkv, D, page, maxp, scale,
                   GROUP: tl.constexpr, GP: tl.constexpr, DP: tl.constexpr, PP: tl.constexpr, SPLITS: tl.constexpr,
                   MAXS: tl.constexpr, PRECISION: tl.constexpr):
    b, kvh, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    heads = kvh * GROUP + tl.arange(0, GP)  # the group's query heads, padded to GP >= 16 rows: tl.dot's M
    q = load_q(q_ptr, b, heads, Hq, D, 1.0, GROUP, GP, DP).to(k_ptr.dtype.element_ty)  # [GP, DP] in q's dtype
    n = tl.load(lens_ptr + b)
    lo, hi = split_of(tl.cdiv(n, page), s, SPLITS)
    m, l_i, acc = softmax_start(GP, DP)
    for p in range(lo, hi):
        rows, valid = page_rows(table_ptr, b, p, n, kvh, Hkv, D, page, maxp, PP)
        k = load_rows(k_ptr, rows, valid, D, DP)  # [PP, DP], the cache's dtype
        sc = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # [GP, PP]: the whole group's scores
        m, alpha, pr, l_i = softmax_fold(tl.where(valid[None, :], sc, float("-inf")), m, l_i)
        v = load_rows(v_ptr, rows, valid, D, DP)
        acc = acc * alpha[:, None] + tl.dot(pr.to(v.dtype), v, input_precision=PRECISION)  # [GP, DP]
    store_split(o_ptr, lse_ptr, b, s, heads, m, l_i, acc, B, Hq, D, GROUP, GP, DP, SPLITS, MAXS)


GQA_DOT_TUNED = tuned(gqa_dot_kernel, [triton.Config({"SPLITS": s}, num_warps=4) for s in (1, 2, 4, 8, 16)],
                      cpu_config=triton.Config({"SPLITS": CPU_SPLITS}, num_warps=4), key=["B", "Hkv", "maxp"])


def _spec() -> dict:
    return triton_spec(gqa_dot_kernel, torch.float16, types={"o_ptr": torch.float32, "lse_ptr": torch.float32,
                                                             "table_ptr": torch.int32, "lens_ptr": torch.int32,
                                                             "scale": float},
                       GROUP=4, GP=16, DP=128, PP=16, SPLITS=4, MAXS=MAX_SPLITS, PRECISION=dot_precision(torch.float16),
                       num_warps=4, num_stages=2)


@register("decode_attention", "triton_gqa_dot", backend="triton", inspect_spec=_spec,
          idea="Triton split-KV, the GQA group's query heads as tl.dot's M rows (padded to 16): Q K^T and P V as MMAs.")
def triton_gqa_dot(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                   seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    o, lse = split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=GQA_DOT_TUNED, min_tile=DOT_MIN,
                            PRECISION=dot_precision(q.dtype))
    return merge(o, lse, empty_like(q))
