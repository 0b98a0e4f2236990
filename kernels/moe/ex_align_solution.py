import numpy as np
import torch
from numba import cuda, int32

import workbench as wb
from kernels.moe_align.reference import sizes
from workbench.interop import to_numba

MAX_E = 1024  # shared-memory counters: 2 x 1024 x 4 B = 8 KiB, well inside one block's 48 KiB
THREADS = 32  # one block; the Numba simulator runs one OS thread per CUDA thread, so keep it small


@cuda.jit
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
    # 3. exclusive prefix sum of the *padded* counts: where each expert's group starts
    if tid == 0:
        # >>> learner
        #> # TODO: round each count up to a multiple of `block`, set cursor[e] to where expert e's group starts,
        #> #       mark the group's blocks in expert_ids, and write the total padded length to n_padded[0].
        #> for e in range(num_experts):
        #>     cursor[e] = 0
        #> n_padded[0] = n
        start = 0
        for e in range(num_experts):
            cursor[e] = start
            padded = (counts[e] + block - 1) // block * block
            for b in range(start // block, (start + padded) // block):
                expert_ids[b] = e
            start += padded
        n_padded[0] = start
        # <<< learner
    cuda.syncthreads()
    # 4. scatter: each slot claims the next free row of its expert's group
    # >>> learner
    #> for s in range(tid, n, nt):  # noqa: B007  (the TODO uses s)
    #>     # TODO: claim a row with an atomic increment of the expert's cursor (two slots of one expert must never
    #>     #       get the same row), then store the slot index there.
    #>     pass
    for s in range(tid, n, nt):
        pos = cuda.atomic.add(cursor, ids[s], 1)
        sorted_ids[pos] = s
    # <<< learner


def moe_align(topk_ids: torch.Tensor, E: int, block: int):  # noqa: N803
    t, k = topk_ids.shape
    if E > MAX_E:
        raise ValueError(f"moe_align exercise: E={E} > MAX_E={MAX_E} shared-memory counters")
    p, nb = sizes(t, k, E, block)
    sorted_ids = wb.empty((p,), torch.int32)
    expert_ids = wb.empty((nb,), torch.int32)
    n_padded = wb.empty((1,), torch.int32)
    flat = topk_ids.reshape(-1)
    align_kernel[1, THREADS](to_numba(flat), np.int32(t * k), np.int32(E), np.int32(block), to_numba(sorted_ids),
                             to_numba(expert_ids), to_numba(n_padded))
    return sorted_ids, expert_ids, n_padded
