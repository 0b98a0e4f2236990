"""What the decode_attention exercises share: the given kernels around each exercise's helper, and their launches.

- ``decode-block-table-gather`` (Triton) writes ``token_slots(table_ptr, b, maxp, t, n, page) -> (slots, valid)``:
  where in the page pool each token of a tile lives. ``gather_kernel`` (here) calls it: one program per (sequence,
  query head) walks the sequence in tiles of ``BLOCK_T`` tokens (a tile spans pages when the page is smaller, and
  a page spans tiles when it is larger) with an online softmax. :func:`paged_decode` binds and launches it.
- ``decode-gqa-map`` (CUDA C) writes ``__device__ int kv_head(int h, int Hq, int Hkv)``. ``ex_gqa_kernel.cuh``
  (beside this file, appended to the learner's source as :data:`GQA_KERNEL`) calls it: one warp per (query head,
  sequence), fp32. :func:`gqa_decode` compiles and launches it.
- ``decode-lse-merge`` (Triton, op ``lse_merge``) writes ``fold_split(m, l_i, acc, ls, o) -> (m, l_i, acc)``:
  one split folded into the running merge. ``fold_kernel`` (here) calls it once per split, in order, handing it the
  split's partial output row as loaded (junk for an empty split), and writes acc / l_i, with l_i = 1 where every
  split was empty: there the fold must have kept acc at 0. :func:`lse_fold` binds and launches it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._launch import learner_raw_kernel
from kernels._triton_hooks import with_helpers
from workbench.contracts import require
from workbench.interop import to_raw

from .reference import default_scale

BLOCK_T = 8  # tokens per step: the check's pages of 4 put two pages in a tile, its pages of 16 two tiles in a page
MAX_D = 128  # the CUDA C kernel keeps a lane's 4 columns of the head in registers

token_slots = None  # the helper gather_kernel calls: bound per launch by paged_decode
fold_split = None  # the helper fold_kernel calls: bound per launch by lse_fold


def _p2(x: int) -> int:
    return triton.next_power_of_2(max(1, int(x)))


# ------------------------------------------------------------------------------ decode-block-table-gather (Triton)
@triton.jit
def gather_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, Hq, Hkv, D, page, maxp, scale,
                  BLOCK_T: tl.constexpr, DP: tl.constexpr):
    b = tl.program_id(0)  # the sequence
    h = tl.program_id(1)  # its query head, which reads KV head h // (Hq // Hkv)
    kvh = h // (Hq // Hkv)
    cols = tl.arange(0, DP)
    in_d = cols < D
    qv = tl.load(q_ptr + (b * Hq + h) * D + cols, mask=in_d, other=0.0).to(tl.float32) * scale
    n = tl.load(lens_ptr + b)  # seq_lens[b]: tokens 0 .. n - 1
    run_max = float("-inf")
    run_sum = 0.0
    out = tl.zeros((DP,), tl.float32)
    for t0 in range(0, n, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        slots, valid = token_slots(table_ptr, b, maxp, t, n, page)  # the exercise's helper: the gather
        at = (slots.to(tl.int64) * Hkv + kvh) * D  # the cache as [P * page, Hkv, D]: slot, then head, then dim
        both = valid[:, None] & in_d[None, :]
        kt = tl.load(k_ptr + at[:, None] + cols[None, :], mask=both, other=0.0).to(tl.float32)
        vt = tl.load(v_ptr + at[:, None] + cols[None, :], mask=both, other=0.0).to(tl.float32)
        sc = tl.where(valid, tl.sum(kt * qv[None, :], axis=1), float("-inf"))  # [BLOCK_T] scores
        new_max = tl.maximum(run_max, tl.max(sc, axis=0))  # finite: a tile starts below n, so t0 is valid
        shrink = tl.exp(run_max - new_max)
        pt = tl.exp(sc - new_max)
        run_sum = run_sum * shrink + tl.sum(pt, axis=0)
        out = out * shrink + tl.sum(pt[:, None] * vt, axis=0)
        run_max = new_max
    tl.store(o_ptr + (b * Hq + h) * D + cols, (out / run_sum).to(o_ptr.dtype.element_ty), mask=in_d)


def paged_decode(token_slots: Any, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Return decode attention from gather_kernel with the learner's ``token_slots`` (one program per (b, h))."""
    kernel = with_helpers(gather_kernel, "paged_decode", token_slots=token_slots)
    b, hq, d = q.shape
    out = wb.empty_like(q)
    if b:
        kernel[(b, hq)](q, k_cache, v_cache, block_table, seq_lens, out, hq, k_cache.shape[2], d, k_cache.shape[1],
                        block_table.shape[1], default_scale(d, scale), BLOCK_T=BLOCK_T, DP=_p2(d))
    return out


# ------------------------------------------------------------------------------------------ decode-gqa-map (CUDA C)
GQA_KERNEL = (Path(__file__).parent / "ex_gqa_kernel.cuh").read_text()


def gqa_decode(source: str, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Return decode attention from ``decode_gqa_map`` of ``source`` (the learner's kv_head, then GQA_KERNEL)."""
    kernel = learner_raw_kernel("gqa_decode", source, "decode_gqa_map",
                                "your __device__ int kv_head(...) followed by GQA_KERNEL (from "
                                "kernels.decode_attention.ex_common)")
    b, hq, d = q.shape
    require("decode_attention", q.dtype == torch.float32,
            f"exercise decode-gqa-map: the given kernel (ex_gqa_kernel.cuh) is float32 only, got {q.dtype}")
    require("decode_attention", d <= MAX_D, f"exercise decode-gqa-map: the given kernel takes D <= {MAX_D}, got {d}")
    out = wb.empty_like(q)
    if b:
        kernel((hq, b), (32,), (to_raw(q), to_raw(k_cache), to_raw(v_cache), to_raw(block_table), to_raw(seq_lens),
                                to_raw(out), np.int32(hq), np.int32(k_cache.shape[2]), np.int32(d),
                                np.int32(k_cache.shape[1]), np.int32(block_table.shape[1]),
                                np.float32(default_scale(d, scale))))
    return out


# ----------------------------------------------------------------------------------------- decode-lse-merge (Triton)
@triton.jit
def fold_kernel(o_ptr, lse_ptr, out_ptr, S, BH, D, DP: tl.constexpr):
    row = tl.program_id(0)  # one (b, h) of the output; split s's partial is row s * BH + row of o[S, B*H, D]
    cols = tl.arange(0, DP)
    m, l_i, acc = float("-inf"), 0.0, tl.zeros((DP,), tl.float32)  # before any split: max, weight sum, output
    for s in range(0, S):
        ls = tl.load(lse_ptr + s * BH + row)
        o = tl.load(o_ptr + (s * BH + row) * D + cols, mask=cols < D, other=0.0).to(tl.float32)  # junk if ls = -inf
        m, l_i, acc = fold_split(m, l_i, acc, ls, o)  # the exercise's helper
    merged = acc / tl.where(l_i > 0, l_i, 1.0)  # every split empty: l_i = 0 and acc = 0 (nothing folded in): 0
    tl.store(out_ptr + row * D + cols, merged.to(out_ptr.dtype.element_ty), mask=cols < D)


def lse_fold(fold_split: Any, o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Return lse_merge(o, lse) from fold_kernel with the learner's ``fold_split`` (one program per (b, h))."""
    kernel = with_helpers(fold_kernel, "lse_fold", fold_split=fold_split)
    s, b, h, d = o.shape
    out = wb.empty((b, h, d), o.dtype, o.device)
    if b * h:
        kernel[(b * h,)](o, lse, out, s, b * h, d, DP=_p2(d))
    return out
