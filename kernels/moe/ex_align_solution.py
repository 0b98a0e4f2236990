import torch
from numba import cuda

from kernels.moe.ex_common import align  # the kernel around your two steps (steps 1 and 2), and its launch


@cuda.jit(device=True)
def padded_offsets(counts, cursor, expert_ids, n_padded, num_experts, block):
    """Step 3 (thread 0): from the per-expert counts, each group's start, its blocks' expert and the total."""
    # >>> learner
    #> # TODO: round each count up to a multiple of `block`, set cursor[e] to where expert e's group starts,
    #> #       mark the group's blocks in expert_ids, and write the total padded length to n_padded[0].
    #> for e in range(num_experts):
    #>     cursor[e] = 0
    #> n_padded[0] = 0
    start = 0
    for e in range(num_experts):
        cursor[e] = start
        padded = (counts[e] + block - 1) // block * block
        for b in range(start // block, (start + padded) // block):
            expert_ids[b] = e
        start += padded
    n_padded[0] = start
    # <<< learner


@cuda.jit(device=True)
def scatter(ids, n, cursor, sorted_ids, tid, nt):
    """Step 4 (every thread): each slot s claims the next free row of its expert's group and writes s there."""
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
    return align(padded_offsets, scatter, topk_ids, E, block)
