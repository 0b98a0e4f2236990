"""MoE in Numba, naive: one block per token does its own routing and runs its top_k experts as matrix-vector products.

Block t (32 threads in cpu mode, 128 on a GPU) handles token t from start to end:

1. Routing, by thread 0: the softmax denominator over the E logits, then top_k rounds of argmax (the lower expert
   id wins a tie, already chosen experts are skipped), then the chosen probabilities divided by their sum when
   ``renormalize``. The argmax runs on the logits themselves: exp is monotone, so their order is the order of p,
   and no two distinct logits can round to the same probability. The choice goes to global scratch (``ids``,
   ``wts``: top_k entries per token), because a shared array needs a size known at compile time and top_k <= E is
   not; ``syncthreads`` also makes a block's global writes visible to the whole block.
2. Gate and up: the threads share the top_k * I pairs (expert j, intermediate column i); each computes two dot
   products over d, g = x . w1[e, i] and u = x . w1[e, I + i], and stores silu(g) * u in fp32 scratch h[t, j, i]
   (global memory again, [T, top_k, I]). One barrier.
3. Down and combine: the threads share the d outputs; output c = sum_j weight_j * sum_i h[t, j, i] * w2[e_j, c, i],
   accumulated in fp32 over all k experts, written once in x's dtype. No atomics: each output has one owner.

Why it is slow on a GPU: every token reads all of its experts' weights, 3*I*d elements each, so the weights are
streamed T*top_k times with no reuse between tokens (decode, T = 1, is fine; prefill is not); and neighbouring
threads walk different weight rows (stride d or I elements), so their loads do not coalesce. Grouping the tokens
of each expert into tiles (v2: permute + grouped GEMM) reads each expert's weights once per tile of tokens.
"""

from __future__ import annotations

import math

import torch

from workbench import MODE, empty_like, register
from workbench.interop import to_numba
from workbench.numba_helpers import cuda, float32, int32, numba_supports
from workbench.registry import CpuLimit

# cpu mode uses one warp's worth: the simulator runs each CUDA thread as an OS thread and every barrier waits for
# all of them. On a GPU 128 threads (4 warps) give enough loads in flight per block for a matrix-vector product.
THREADS = 128 if MODE == "gpu" else 32
# The simulator costs ~20-30 us per multiply-add here (17 tokens of d = 33, I = 20, top_k = 2: 67k multiply-adds
# in ~2 s): cap one call's 3*T*top_k*I*d multiply-adds at 2^17 (~3-4 s). The op's check shapes need <= 67k.
CPU_LIMIT = CpuLimit("3*T*top_k*I*d", 1 << 17,
                     "multiply-adds; the Numba simulator runs one OS thread per CUDA thread, ~25 us per multiply-add")


@cuda.jit(device=True)
def route_token(logits, t, ids, wts, top_k, renormalize):
    """Write token ``t``'s top_k experts (lowest id on a tie) and their softmax weights to ``ids[t]``, ``wts[t]``."""
    n_exp = logits.shape[1]
    mx = float32(-math.inf)
    for e in range(n_exp):
        mx = max(mx, float32(logits[t, e]))
    den = float32(0.0)
    for e in range(n_exp):
        den += math.exp(float32(logits[t, e]) - mx)
    total = float32(0.0)
    for j in range(top_k):
        best = int32(-1)
        best_v = float32(-math.inf)
        for e in range(n_exp):
            v = float32(logits[t, e])
            taken = False
            for jj in range(j):
                if ids[t, jj] == e:
                    taken = True
            # Strictly greater, scanning e upwards: on a tie the lower expert id stays.
            if not taken and (best < 0 or v > best_v):
                best = e
                best_v = v
        p = math.exp(best_v - mx) / den
        ids[t, j] = best
        wts[t, j] = p
        total += p
    if renormalize:
        for j in range(top_k):
            wts[t, j] = wts[t, j] / total


@cuda.jit
def moe_token(x, logits, w1, w2, out, ids, wts, h, top_k, renormalize):
    t = cuda.blockIdx.x  # one block per token
    tid = cuda.threadIdx.x
    d = x.shape[1]
    inter = w2.shape[2]

    # Phase 1: routing by one thread (E * top_k compares: tiny next to the 3*I*d multiply-adds per expert).
    if tid == 0:
        route_token(logits, t, ids, wts, top_k, renormalize)
    cuda.syncthreads()  # the choice (global scratch) is written before anyone reads it

    # Phase 2: the threads share the top_k * I (expert, column) pairs; each does 2 dot products of length d.
    for q in range(tid, top_k * inter, THREADS):
        j = q // inter
        i = q - j * inter
        e = ids[t, j]
        g = float32(0.0)
        u = float32(0.0)
        for c in range(d):  # rows i and I + i of w1[e]: contiguous along d for one thread, stride d across threads
            xv = float32(x[t, c])  # fp32 x fp16 -> fp32: exact products, and one conversion serves both sums
            g += xv * w1[e, i, c]
            u += xv * w1[e, inter + i, c]
        h[t, j, i] = g / (float32(1.0) + math.exp(-g)) * u  # silu(g) * u; g -> -inf gives -0, not NaN
    cuda.syncthreads()  # all of h[t] is written before the down projection reads it

    # Phase 3: the threads share the d outputs; each sums over the k experts and I columns in fp32.
    for c in range(tid, d, THREADS):
        acc = float32(0.0)
        for j in range(top_k):
            e = ids[t, j]
            part = float32(0.0)
            for i in range(inter):
                part += h[t, j, i] * w2[e, c, i]  # h is fp32: the product is fp32 whatever w2's dtype
            acc += wts[t, j] * part
        out[t, c] = acc  # rounded once, to x's dtype


@register("moe", "numba_naive", backend="numba", dtypes=("float32", "float16"), supports=numba_supports(),
          cpu_limit=CPU_LIMIT,
          idea="Numba: one block per token routes itself, then matrix-vector products over its top_k experts.")
def numba_naive(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
                renormalize: bool = True) -> torch.Tensor:
    t = x.shape[0]
    inter = w2.shape[2]
    out = empty_like(x)
    if out.numel() == 0:
        return out
    # Scratch in global memory (not outputs: plain torch.empty, every element is written before it is read).
    ids = torch.empty((t, top_k), dtype=torch.int32, device=x.device)
    wts = torch.empty((t, top_k), dtype=torch.float32, device=x.device)
    h = torch.empty((t, top_k, inter), dtype=torch.float32, device=x.device)
    args = (x, router_logits, w1, w2, out, ids, wts, h)
    moe_token[t, THREADS](*(to_numba(a.contiguous()) for a in args), top_k, bool(renormalize))
    return out
