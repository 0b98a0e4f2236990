"""MoE in CUDA C, unfused: route, sort by expert, permute, grouped GEMM, SiLU-and-mul, grouped GEMM, combine.

The classic pipeline, every step its own kernel: seven launches (nine when moe_align needs more than one block,
above 4096 slots):

1. ``moe_topk`` (routing): weights[T, k] fp32 and expert ids[T, k] int32.
2. ``moe_align`` (counting sort): the T*k slots grouped by expert, each group padded to BLOCK_M = 64 rows,
   giving sorted_ids[P], expert_ids[P/64] and n_padded (P is the worst case, so no host sync is needed).
3. ``moe_permute``: gather the token rows into a padded xp[P, d] (zero rows for padding) and record where each
   slot landed (pos, the inverse of sorted_ids) for step 7.
4. ``moe_gemm_nt`` gate/up: h[P, 2I] = xp @ w1[e]^T per 64-row block, e read from expert_ids (-1: exit).
5. ``moe_silu_mul``: act[P, I] = silu(h[:, :I]) * h[:, I:].
6. ``moe_gemm_nt`` down: y[P, d] = act @ w2[e]^T.
7. ``moe_combine``: out[t] = sum_j weight[t, j] * y[pos[t*k + j]], in slot order (deterministic, no atomics).

**Every intermediate goes through HBM.** Each kernel writes its result to global memory and the next reads it
back. Napkin numbers for Mixtral prefill (T = 4096, d = 4096, I = 14336, E = 8, top_k = 2, fp16), P = 8704 rows:
xp 71 MB, h 499 MB, act 250 MB, y 71 MB: 0.89 GB written and read again, 1.78 GB of traffic, 0.37 ms at the
H200's 4.8 TB/s, next to 2.82 GB of expert weights (0.59 ms) that any implementation must read. Padding rows cost
full price too: at decode (T = 1) each of the two active 64-row tiles computes 63 rows of zeros. This is the
"before" picture of the ladder: a fused kernel (the Triton variant later on) gathers the token rows while it loads
its GEMM tiles (no xp) and applies SiLU and the routing weights in its epilogues: fewer round trips to HBM.

The GEMM is a plain smem-tiled SIMT kernel (64 x 64 tile, BK = 16, a 4 x 4 register tile per thread, like the
2D block-tiling step of notebook 01), fp32 accumulation for every dtype; intermediates are stored in the input
dtype, as torch and production pipelines do. Kernels in ``moe_experts.cu``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels._launch import cuda_kernel, cuda_spec, only_dtype
from kernels.moe_align.v1_cuda_align import MAX_E as ALIGN_MAX_E
from kernels.moe_align.v1_cuda_align import cuda_align
from kernels.moe_topk.v1_cuda_topk import MAX_E as TOPK_MAX_E
from kernels.moe_topk.v1_cuda_topk import cuda_topk
from workbench import empty_like, register
from workbench.interop import to_raw

CU = Path(__file__).with_name("moe_experts.cu")
BLOCK_M = 64  # rows per GEMM tile and moe_align's block (the .cu file's BLOCK_M)
BN = 64  # output columns per GEMM tile
GEMM_THREADS = 256  # a 4 x 4 register tile per thread
ROW_THREADS = 128  # permute, SiLU-and-mul and combine: one block per row


def kernels(dtype: torch.dtype) -> dict[str, object]:
    """Return the four kernels of ``moe_experts.cu`` for ``dtype`` (compiled once per process).

    On a GPU NVRTC compiles one dtype's kernels (``only_dtype``); the CPU engine builds the whole file once.
    """
    return {k: cuda_kernel(CU, f"moe_{k}", dtype, gpu_options=only_dtype(dtype))
            for k in ("permute", "gemm_nt", "silu_mul", "combine")}


def cu_spec(name: str = "gemm_nt", dtype: torch.dtype = torch.float16) -> dict:
    """Return what wb.inspect compiles: kernel ``moe_<name>_<dtype>`` of ``moe_experts.cu``, one dtype's file."""
    return cuda_spec(CU, f"moe_{name}", dtype, options=only_dtype(dtype))


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _supports(shape: dict) -> str | None:
    limit = min(TOPK_MAX_E, ALIGN_MAX_E)
    if shape["E"] > limit:
        return (f"moe/cuda_permute routes with moe_topk/cuda_topk and sorts with moe_align/cuda_align: E <= {limit}, "
                f"got E={shape['E']}")
    return None


@register("moe", "cuda_permute", backend="cuda", cu_file=CU.name, supports=_supports, inspect_spec=cu_spec,
          idea="CUDA C, unfused: topk, align, permute rows, grouped SIMT GEMMs, SiLU, combine; all through HBM.")
def cuda_permute(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
                 renormalize: bool = True) -> torch.Tensor:
    t, d = x.shape
    n_exp, inter = w1.shape[0], w1.shape[1] // 2
    out = empty_like(x)
    if out.numel() == 0:
        return out
    if inter == 0:  # experts with no hidden units output zeros
        return out.zero_()
    x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
    # The launchers themselves (.fn), not the registry's checked call: moe_align's validation reads min/max of the
    # ids back to the host, a sync per layer; these ids come from cuda_topk, in range by construction.
    weights, ids = cuda_topk.fn(router_logits.contiguous(), top_k, renormalize)  # [T, k] fp32, [T, k] int32
    sorted_ids, expert_ids, n_padded = cuda_align.fn(ids, n_exp, BLOCK_M)
    p = sorted_ids.shape[0]  # the worst-case padded row count, a multiple of BLOCK_M
    n_slots = t * top_k
    # Intermediates (plain torch.empty: rows past n_padded are never written nor read).
    dev, dt = x.device, x.dtype
    xp = torch.empty((p, d), dtype=dt, device=dev)
    pos = torch.empty((n_slots,), dtype=torch.int32, device=dev)
    h = torch.empty((p, 2 * inter), dtype=dt, device=dev)
    act = torch.empty((p, inter), dtype=dt, device=dev)
    y = torch.empty((p, d), dtype=dt, device=dev)
    k = kernels(dt)
    i32 = np.int32
    k["permute"]((p,), (ROW_THREADS,), (to_raw(x), to_raw(sorted_ids), to_raw(n_padded), to_raw(xp), to_raw(pos),
                                        i32(n_slots), i32(top_k), i32(d)))
    k["gemm_nt"]((p // BLOCK_M, _cdiv(2 * inter, BN)), (GEMM_THREADS,),
                 (to_raw(xp), to_raw(w1), to_raw(expert_ids), to_raw(h), i32(2 * inter), i32(d)))
    k["silu_mul"]((p,), (ROW_THREADS,), (to_raw(h), to_raw(n_padded), to_raw(act), i32(inter)))
    k["gemm_nt"]((p // BLOCK_M, _cdiv(d, BN)), (GEMM_THREADS,),
                 (to_raw(act), to_raw(w2), to_raw(expert_ids), to_raw(y), i32(d), i32(inter)))
    k["combine"]((t,), (ROW_THREADS,), (to_raw(y), to_raw(weights), to_raw(pos), to_raw(out), i32(top_k), i32(d)))
    return out
