"""Attention in Numba, tiled in FlashAttention-2's loop order: query-row tiles outside, K/V tiles inside.

A block owns BR query rows (one thread each) of one head and walks the keys in tiles of BC; the grid has one block
per (query tile, batch x head), so the sequence is split across blocks as in FlashAttention-2. The block stages each
K and V tile in shared memory once and all BR threads reuse it, so K and V are read from global memory
ceil(Sq/BR) times instead of Sq times (``numba_naive``). Each thread keeps its row's running max m, running sum l
and an unnormalised output o[D] in local arrays; a new tile with max m' rescales them by exp(m - m'):
    l = l * exp(m - m') + sum_j exp(s_j - m'),   o = o * exp(m - m') + sum_j exp(s_j - m') v_j
and the division by l happens once at the end (FlashAttention-1 instead loops over K/V tiles outside and rewrites
a normalised O tile after each one). Nothing of size Sq x Sk is ever stored: O(N) memory.
Causal: a key tile that starts after the block's last query row is masked for every row, so it is skipped.
"""

from __future__ import annotations

import math

import torch

from kernels.attention._host import rows_3d, start
from workbench import MODE, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, numba_supports
from workbench.registry import CpuLimit

BR = 64 if MODE == "gpu" else 32  # query rows per block = threads per block (the simulator: one OS thread each)
BC = 32  # keys per K/V tile
DMAX = 128  # head dim bound: shared K and V tiles are BC x DMAX fp32 = 2 * 32 * 128 * 4 B = 32 KiB per block
# The simulator runs ~2-7 us per multiply-add (measured here on one core: 32x32 keys, D = 16 in 0.23 s; 64x64,
# D = 32 in 0.64 s): cap one call at B*H*Sq*Sk*D = 2^19 (2^20 multiply-adds, a few seconds), which admits every
# check shape of the op (the largest, H=2 x 100 x 100 x D=16, takes ~3 s on 2 cores).
CPU_LIMIT = CpuLimit("B*H*Sq*Sk*D", 2**19,
                     "the Numba simulator runs one OS thread per CUDA thread, ~2-7 us per multiply-add")


@cuda.jit
def flash_fwd(q, k, v, out, sq, sk, d, scale, causal):
    bh = cuda.blockIdx.y
    r0 = cuda.blockIdx.x * BR  # this block's first query row
    t = cuda.threadIdx.x
    i = r0 + t  # this thread's query row
    ks = cuda.shared.array((BC, DMAX), float32)  # K tile: 16 KiB
    vs = cuda.shared.array((BC, DMAX), float32)  # V tile: 16 KiB
    qr = cuda.local.array(DMAX, float32)  # q row, pre-multiplied by the scale
    o = cuda.local.array(DMAX, float32)  # unnormalised output row
    s = cuda.local.array(BC, float32)  # this tile's scores
    row_ok = i < sq
    for e in range(d):
        qr[e] = float32(q[bh, i, e]) * scale if row_ok else float32(0.0)
        o[e] = float32(0.0)
    m = float32(-math.inf)
    lsum = float32(0.0)

    kend = sk
    if causal:  # row i sees keys j <= i; the block's last row is r0 + BR - 1: later tiles are fully masked
        kend = min(sk, r0 + BR)
    for c0 in range(0, kend, BC):  # block-uniform trip count: every thread reaches every syncthreads
        n = min(BC, sk - c0)
        for idx in range(t, n * d, BR):  # BR threads stage n x d elements of K and V: neighbours read neighbours
            jj = idx // d
            e = idx - jj * d
            ks[jj, e] = float32(k[bh, c0 + jj, e])
            vs[jj, e] = float32(v[bh, c0 + jj, e])
        cuda.syncthreads()  # the tile is complete before anyone reads it

        mt = float32(-math.inf)
        for jj in range(n):  # scores: n x d multiply-adds, K rows broadcast from shared memory
            x = float32(-math.inf)
            if not causal or c0 + jj <= i:
                x = float32(0.0)
                for e in range(d):
                    x += qr[e] * ks[jj, e]
            s[jj] = x
            mt = max(mt, x)
        m_new = max(m, mt)
        if m_new != -math.inf:  # a row with no visible key yet has nothing to add (and avoids -inf - -inf)
            alpha = math.exp(m - m_new)  # exp(-inf) = 0 on the first tile
            lsum *= alpha
            for e in range(d):
                o[e] *= alpha
            for jj in range(n):  # o += p_j v_j: another n x d multiply-adds
                p = math.exp(s[jj] - m_new)
                lsum += p
                for e in range(d):
                    o[e] += p * vs[jj, e]
            m = m_new
        cuda.syncthreads()  # everyone is done with the tile before the next one overwrites it

    if row_ok:
        inv = float32(1.0) / lsum
        for e in range(d):
            out[bh, i, e] = o[e] * inv


def _supports(shape: dict) -> str | None:
    if shape["D"] > DMAX:
        return (f"attention/numba_flash: head dim D <= {DMAX} (local o[D] and shared K/V tiles are sized for it), "
                f"got D={shape['D']}")
    return None


@register("attention", "numba_flash", backend="numba", dtypes=("float32", "float16"),
          supports=numba_supports(_supports), cpu_limit=CPU_LIMIT,
          idea="Numba, FlashAttention-2's loop order: a thread per query row, K/V tiles shared by the block.")
def numba_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    sk = k.shape[2]
    out, scale = start(q, k, scale)
    if scale is None:
        return out
    q3, k3, v3, o3 = rows_3d(q, k, v, out)
    flash_fwd[((sq + BR - 1) // BR, b * h), BR](to_numba(q3), to_numba(k3), to_numba(v3), to_numba(o3), sq, sk, d,
                                                float32(scale), causal)
    return out
