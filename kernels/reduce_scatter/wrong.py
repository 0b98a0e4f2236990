"""Known-wrong reduce_scatter: the all-reduce's reduce-scatter indices, so each rank returns the wrong chunk.

``wrong_chunk`` runs the ring of the all-reduce (send chunk r - s, add chunk r - s - 1), which ends with chunk
r + 1 fully summed on rank r, and returns that chunk. Every value is a correct sum, of another rank's chunk: with
ragged chunks the shape is off too. The checker finds each rank's output equal to another chunk of the sum and says
``wrong_chunk``. World 1 (one chunk) passes.
"""

from __future__ import annotations

import torch

from kernels._comm import chunks, rank_world
from kernels.all_reduce.v2_ring import reduce_scatter_ring
from workbench import register


@register("reduce_scatter", "wrong_chunk", backend="torch", expected_diagnosis="wrong_chunk", dtypes=("float32",),
          idea="KNOWN WRONG: the all-reduce's reduce-scatter indices; rank r returns chunk r+1, the one it completed.")
def wrong_chunk(x: torch.Tensor, group: object = None) -> torch.Tensor:
    rank, world = rank_world(group)
    parts = chunks(x.clone(), world)
    reduce_scatter_ring(parts, rank, world, group)
    return parts[(rank + 1) % world].clone()  # BUG: rank r must return chunk r
