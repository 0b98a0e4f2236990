"""Attention in Numba, naive: one block per query row, the whole score row in shared memory, three phases.

Phase 1: threads stride over the keys, each score s_j = scale * q . k_j goes into a shared row (masked keys get
-inf) while each thread keeps its running max; the per-thread maxima meet in shared memory. Phase 2:
p_j = exp(s_j - max) overwrites the row and the per-thread sums meet the same way. Phase 3: threads stride over
D, o_d = sum_j p_j v[j, d] / sum.
Every query row rereads all of K and V from global memory (B*H*Sq*Sk*D*2 loads): no reuse between rows, which is
what the tiled FlashAttention kernels (v2 onwards) fix.
"""

from __future__ import annotations

import math

import torch

from kernels.attention._host import rows_3d, start
from workbench import MODE, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports
from workbench.registry import CpuLimit

# cpu mode uses one warp's worth: the simulator runs each CUDA thread as an OS thread, and every barrier waits for
# all of them to get the GIL (a tree reduction's 2 * log2(32) = 10 barriers per row took ~0.4 s per row).
THREADS = 128 if MODE == "gpu" else 32
MAX_SK = 8192  # the score row in shared memory: 8192 fp32 = 32 KiB per block (the static limit is 48 KiB)
# The simulator takes ~0.1 s per query row (32 OS threads, 2 barriers, Sk * D * 2 multiply-adds): cap the rows.
CPU_LIMIT = CpuLimit("B*H*Sq", 64, "the Numba simulator runs one OS thread per CUDA thread, ~0.1 s per query row")


@cuda.jit
def attention_row(q, k, v, out, sk, d, scale, causal):
    i = cuda.blockIdx.x  # one block per query row i of head bh
    bh = cuda.blockIdx.y
    t = cuda.threadIdx.x
    srow = cuda.shared.array(MAX_SK, float32)  # the scores, then the probabilities, of row i: 4 B per key
    pmax = cuda.shared.array(THREADS, float32)  # per-thread partial maxima (own line: see the simulator note)
    psum = cuda.shared.array(THREADS, float32)  # per-thread partial sums

    # Phase 1: scores and the row max. Key j is visible unless causal and j > i (top-left aligned mask).
    mx = float32(-math.inf)
    for j in range(t, sk, THREADS):
        s = float32(-math.inf)
        if not causal or j <= i:
            s = float32(0.0)
            for e in range(d):  # D multiply-adds, the q row read from global (L1/L2) by every thread
                s += float32(q[bh, i, e]) * float32(k[bh, j, e])
            s *= scale
        srow[j] = s
        mx = max(mx, s)
    pmax[t] = mx
    cuda.syncthreads()
    # Every thread folds all THREADS partials itself (broadcast reads of one address: no bank conflicts), so no
    # tree and no second barrier to hand out the result: 2 barriers per row in all.
    mx = float32(-math.inf)
    for u in range(THREADS):
        mx = max(mx, pmax[u])  # finite: key 0 is always visible (Sk >= 1 is checked on the host)

    # Phase 2: probabilities (unnormalised) in place, and their sum. Thread t rewrites only its own srow[j].
    sm = float32(0.0)
    for j in range(t, sk, THREADS):
        p = math.exp(srow[j] - mx)  # exp(-inf) = 0 for masked keys
        srow[j] = p
        sm += p
    psum[t] = sm
    cuda.syncthreads()  # all of srow is probabilities and every partial sum is in
    sm = float32(0.0)
    for u in range(THREADS):
        sm += psum[u]
    inv = float32(1.0) / sm

    # Phase 3: threads over D; neighbouring threads read neighbouring v[j, e]: coalesced.
    for e in range(t, d, THREADS):
        o = float32(0.0)
        for j in range(sk):
            o += srow[j] * float32(v[bh, j, e])
        out[bh, i, e] = o * inv


def _supports(shape: dict) -> str | None:
    if shape["Sk"] > MAX_SK:
        return (f"attention/numba_naive keeps a whole score row in shared memory: Sk <= {MAX_SK} (32 KiB of fp32), "
                f"got Sk={shape['Sk']}; the flash variants have no Sk limit")
    return None


@register("attention", "numba_naive", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(_supports), cpu_limit=CPU_LIMIT,
          idea="Numba: one block per query row, the score row in shared memory, block max and sum, then P @ V.")
def numba_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    sk = k.shape[2]
    out, scale = start(q, k, scale)
    if scale is None:
        return out
    q3, k3, v3, o3 = rows_3d(q, k, v, out)
    attention_row[(sq, b * h), THREADS](to_numba(q3), to_numba(k3), to_numba(v3), to_numba(o3), sk, d,
                                        float32(scale), causal)
    return out
