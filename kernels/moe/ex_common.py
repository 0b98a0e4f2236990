"""What the moe exercises share: routing and alignment in torch, the gate/up kernel, the align kernel, the launches.

``moe-align-block-size`` (Numba) writes two ``@cuda.jit(device=True)`` helpers that ``align_kernel`` (built here
around them, GPU-Puzzles style: ``cuda.jit(make(helpers))``, once per pair of helpers) calls:
``padded_offsets(counts, cursor, expert_ids, n_padded, num_experts, block)``, run by thread 0 after the
histogram, and ``scatter(ids, n, cursor, sorted_ids, tid, nt)``, run by every thread after the barrier that
follows it. :func:`align` launches it.

``ex-silu`` (moe-silu-and-mul) writes ``silu_and_mul``, the epilogue that ``gate_up_kernel`` (here) calls, and
borrows the solved down-and-combine launch from here; ``ex-combine`` (moe-weighted-combine) writes
``combine_rows``, the epilogue that ``down_combine_kernel`` (here) calls, and borrows the solved gate/up launch.
The solved epilogues live in their solution files; this module only binds them, so each is written exactly once.
The known-wrong ``wrong_combine_store`` (wrong.py) is this down kernel with a storing epilogue.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_hooks import with_helpers
from kernels.moe.reference import route
from kernels.moe_align.reference import sizes, torch_sort
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, int32  # stand-ins that refuse when numba is broken

BLOCK = 16  # tiny tiles: the Triton interpreter costs ~1 ms per program, and tl.dot needs dims >= 16

silu_and_mul = None  # the epilogue gate_up_kernel calls: bound per launch by gate_up_silu
combine_rows = None  # the epilogue down_combine_kernel calls: bound per launch by down_and_combine


@triton.jit
def gate_up_kernel(x_ptr, w1_ptr, a_ptr, sorted_ptr, expert_ptr, npad_ptr, n_slots, top_k, d, inter,
                   PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)  # a block of BLOCK_M padded rows, all of one expert
    pid_n = tl.program_id(1)  # a tile of BLOCK_N columns of the intermediate I
    if pid_m * BLOCK_M >= tl.load(npad_ptr):
        return  # a block past the used rows (the grid is sized for the worst case)
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots  # padding rows hold the sentinel n_slots = T * top_k
    tok = slots // top_k  # gather straight from x: no permuted copy of the activations
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    w_gate = w1_ptr + e * 2 * inter * d + cols[None, :] * d  # rows 0..I-1 of w1[e]
    w_up = w_gate + inter * d  # rows I..2I-1
    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, d, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + tok[:, None] * d + ks[None, :], mask=valid[:, None] & (ks[None, :] < d), other=0.0)
        wmask = (ks[:, None] < d) & (cols[None, :] < inter)
        gate = tl.dot(a, tl.load(w_gate + ks[:, None], mask=wmask, other=0.0), gate, input_precision=PRECISION)
        up = tl.dot(a, tl.load(w_up + ks[:, None], mask=wmask, other=0.0), up, input_precision=PRECISION)
    act = silu_and_mul(gate, up)  # the fused epilogue: the exercise's helper
    tl.store(a_ptr + slots[:, None] * inter + cols[None, :], act.to(a_ptr.dtype.element_ty),
             mask=valid[:, None] & (cols[None, :] < inter))


def route_and_align(router_logits: torch.Tensor, top_k: int, renormalize: bool
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (flat router weights [T*k] fp32, sorted_ids, expert_ids, n_padded) for blocks of BLOCK rows."""
    w, ids = route(router_logits, top_k, renormalize)
    sorted_ids, expert_ids, n_padded = torch_sort.fn(ids.to(torch.int32), router_logits.shape[1], BLOCK)
    return w.float().reshape(-1).contiguous(), sorted_ids, expert_ids, n_padded


def gate_up_silu(x: torch.Tensor, w1: torch.Tensor, sorted_ids: torch.Tensor, expert_ids: torch.Tensor,
                 n_padded: torch.Tensor, top_k: int, silu_and_mul: Any = None) -> torch.Tensor:
    """Return a[T*k, I] = silu_and_mul(x w_gate^T, x w_up^T) per slot (by default the solved epilogue of ex-silu)."""
    if silu_and_mul is None:
        from kernels.moe.ex_silu_solution import silu_and_mul
    kernel = with_helpers(gate_up_kernel, "gate_up_silu", silu_and_mul=silu_and_mul)
    t, d = x.shape
    inter = w1.shape[1] // 2
    a = torch.empty((t * top_k, inter), dtype=x.dtype, device=x.device)
    grid = (expert_ids.numel(), triton.cdiv(inter, BLOCK))
    kernel[grid](x, w1, a, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                 PRECISION="ieee" if x.dtype == torch.float32 else "tf32", BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return a


@triton.jit
def down_combine_kernel(a_ptr, w2_ptr, out_ptr, weight_ptr, sorted_ptr, expert_ptr, npad_ptr, n_slots, top_k, d,
                        inter, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)  # a block of BLOCK_M padded rows, all of one expert
    pid_n = tl.program_id(1)  # a tile of BLOCK_N output columns of d
    if pid_m * BLOCK_M >= tl.load(npad_ptr):
        return
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + slots[:, None] * inter + ks[None, :], mask=valid[:, None] & (ks[None, :] < inter),
                    other=0.0)
        w = tl.load(w2_ptr + e * d * inter + cols[None, :] * inter + ks[:, None],
                    mask=(ks[:, None] < inter) & (cols[None, :] < d), other=0.0)  # w2[e].T tile: [BLOCK_K, BLOCK_N]
        acc = tl.dot(a, w, acc, input_precision=PRECISION)
    combine_rows(out_ptr, acc, weight_ptr, slots, valid, cols, top_k, d)  # the fused epilogue: the exercise's helper


def down_and_combine(a: torch.Tensor, w2: torch.Tensor, weights: torch.Tensor, sorted_ids: torch.Tensor,
                     expert_ids: torch.Tensor, n_padded: torch.Tensor, t: int, top_k: int,
                     combine_rows: Any = None) -> torch.Tensor:
    """Return out[T, d] = sum over each token's slots of weight * (a w2[e]^T) (by default ex-combine's epilogue)."""
    if combine_rows is None:
        from kernels.moe.ex_combine_solution import combine_rows
    kernel = with_helpers(down_combine_kernel, "down_and_combine", combine_rows=combine_rows)
    d, inter = w2.shape[1], w2.shape[2]
    out = torch.zeros((t, d), dtype=torch.float32, device=a.device)  # atomics accumulate in fp32
    grid = (expert_ids.numel(), triton.cdiv(d, BLOCK))
    kernel[grid](a, w2, out, weights, sorted_ids, expert_ids, n_padded, t * top_k, top_k, d, inter,
                 PRECISION="ieee" if a.dtype == torch.float32 else "tf32", BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return out.to(a.dtype)


# ------------------------------------------------------------------------- moe-align-block-size (Numba)
MAX_E = 1024  # shared-memory counters: 2 x 1024 x 4 B = 8 KiB, well inside one block's 48 KiB
THREADS = 32  # one block; the Numba simulator runs one OS thread per CUDA thread, so keep it small

_ALIGN: dict[tuple[int, int], tuple[Any, Any, Any]] = {}  # (ids of the helpers) -> (helpers, kernel)


def _is_device_function(f: object) -> bool:
    """Return whether ``f`` is a ``@cuda.jit(device=True)`` function (the simulator's or a GPU's)."""
    return bool(getattr(f, "_device", False) or getattr(f, "targetoptions", {}).get("device", False))


def _make_align_kernel(padded_offsets, scatter):
    """Return the counting-sort kernel around the learner's two steps (see the module docstring)."""
    def align_kernel(ids, n, num_experts, block, sorted_ids, expert_ids, n_padded):
        counts = cuda.shared.array(MAX_E, int32)
        cursor = cuda.shared.array(MAX_E, int32)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        # 1. zero the histogram and fill the outputs with their "nothing here" values
        for e in range(tid, num_experts, nt):
            counts[e] = 0
        for i in range(tid, sorted_ids.size, nt):
            sorted_ids[i] = n  # the sentinel slot: GEMM kernels mask it
        for b in range(tid, expert_ids.size, nt):
            expert_ids[b] = -1
        cuda.syncthreads()
        # 2. histogram: one atomic increment per routed slot
        for s in range(tid, n, nt):
            cuda.atomic.add(counts, ids[s], 1)
        cuda.syncthreads()
        # 3. exclusive prefix sum of the padded counts (thread 0), 4. the scatter (every thread)
        if tid == 0:
            padded_offsets(counts, cursor, expert_ids, n_padded, num_experts, block)
        cuda.syncthreads()
        scatter(ids, n, cursor, sorted_ids, tid, nt)
    return align_kernel


def align(padded_offsets: Any, scatter: Any, topk_ids: torch.Tensor, E: int, block: int  # noqa: N803
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (sorted_ids, expert_ids, n_padded) of ``topk_ids`` from align_kernel with the learner's two steps."""
    for name, f in (("padded_offsets", padded_offsets), ("scatter", scatter)):
        if not _is_device_function(f):
            raise TypeError(f"moe_align exercise: {name} must be a @cuda.jit(device=True) function (the given "
                            f"kernel calls it on the GPU), got {f!r}; put @cuda.jit(device=True) above `def {name}`")
    t, k = topk_ids.shape
    if E > MAX_E:
        raise ValueError(f"moe_align exercise: E={E} > MAX_E={MAX_E} shared-memory counters")
    key = (id(padded_offsets), id(scatter))
    hit = _ALIGN.get(key)
    if hit is None or hit[0] is not padded_offsets or hit[1] is not scatter:
        hit = _ALIGN[key] = (padded_offsets, scatter, cuda.jit(_make_align_kernel(padded_offsets, scatter)))
    p, nb = sizes(t, k, E, block)
    sorted_ids = wb.empty((p,), torch.int32)
    expert_ids = wb.empty((nb,), torch.int32)
    n_padded = wb.empty((1,), torch.int32)
    flat = topk_ids.reshape(-1)
    hit[2][1, THREADS](to_numba(flat), np.int32(t * k), np.int32(E), np.int32(block), to_numba(sorted_ids),
                       to_numba(expert_ids), to_numba(n_padded))
    return sorted_ids, expert_ids, n_padded
