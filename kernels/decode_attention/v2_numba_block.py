"""Paged decode attention in Numba: one block per (sequence, query head), the scores in shared memory.

Block (h, b) serves query head h of sequence b, reading KV head h // group. Phase 1: threads stride over the
sequence's tokens; token t's page is ``block_table[b, t // page]`` and its slot ``t % page`` (the gather), its score
scale * q . k_t goes into a shared row, each thread keeps its running max and the maxima meet in shared memory.
Phase 2: p_t = exp(s_t - max) in place, the sums meet the same way. Phase 3: threads over D,
o_d = sum_t p_t v_t[d] / sum. Tokens past seq_lens[b] are never touched, so neither are the block-table entries
past the sequence's last page.
"""

from __future__ import annotations

import math

import torch

from workbench import MODE, empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports
from workbench.registry import CpuLimit

from .reference import default_scale

THREADS = 128 if MODE == "gpu" else 16  # the simulator runs one OS thread per CUDA thread
MAX_L = 8192  # the score row in shared memory: 32 KiB of fp32
CPU_LIMIT = CpuLimit("B*Hq", 64, "the Numba simulator runs one OS thread per CUDA thread, one block per (b, h)")


@cuda.jit(device=True)
def block_max(slots, t0, x):
    """Return the max of every thread's ``x``: each writes its own slot, one barrier, then every thread reads all
    THREADS slots (the same address at once: a broadcast, no bank conflict), so no tree and no second barrier."""
    slots[t0] = x
    cuda.syncthreads()
    m = float32(-math.inf)
    for u in range(THREADS):
        m = max(m, slots[u])
    return m


@cuda.jit(device=True)
def block_sum(slots, t0, x):
    """Return the sum of every thread's ``x``, as :func:`block_max` does (its own slots: no barrier between)."""
    slots[t0] = x
    cuda.syncthreads()
    total = float32(0.0)
    for u in range(THREADS):
        total += slots[u]
    return total


@cuda.jit
def decode_block(q, k, v, table, lens, out, group, page, scale):
    h = cuda.blockIdx.x
    b = cuda.blockIdx.y
    t0 = cuda.threadIdx.x
    srow = cuda.shared.array(MAX_L, float32)
    pmax = cuda.shared.array(THREADS, float32)
    psum = cuda.shared.array(THREADS, float32)
    kvh = h // group
    n = lens[b]
    d_all = q.shape[2]

    mx = float32(-math.inf)
    for t in range(t0, n, THREADS):  # phase 1: scores through the block table
        pg = table[b, t // page]
        slot = t % page
        s = float32(0.0)
        for e in range(d_all):
            s += float32(q[b, h, e]) * float32(k[pg, slot, kvh, e])
        s *= scale
        srow[t] = s
        mx = max(mx, s)
    mx = block_max(pmax, t0, mx)

    sm = float32(0.0)
    for t in range(t0, n, THREADS):  # phase 2: probabilities in place, their sum
        p = math.exp(srow[t] - mx)
        srow[t] = p
        sm += p
    inv = float32(1.0) / block_sum(psum, t0, sm)

    for e in range(t0, d_all, THREADS):  # phase 3: threads over D
        o = float32(0.0)
        for t in range(n):
            o += srow[t] * float32(v[table[b, t // page], t % page, kvh, e])
        out[b, h, e] = o * inv


def _supports(shape: dict) -> str | None:
    if shape["L"] > MAX_L:
        return f"decode_attention/numba_block keeps a score row in shared memory: L <= {MAX_L}, got L={shape['L']}"
    return None


@register("decode_attention", "numba_block", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(_supports), cpu_limit=CPU_LIMIT,
          idea="Numba: one block per (sequence, head), scores via the block table into shared memory, then P @ V.")
def numba_block(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    out = empty_like(q)
    b, hq, _ = q.shape
    if out.numel():
        decode_block[(hq, b), THREADS](to_numba(q), to_numba(k_cache), to_numba(v_cache), to_numba(block_table),
                                       to_numba(seq_lens), to_numba(out), hq // k_cache.shape[2],
                                       k_cache.shape[1], float32(default_scale(q.shape[-1], scale)))
    return out
