"""Known-wrong tp_mlp: the all-reduce left out, so each rank returns its own partial sum.

``wrong_no_all_reduce`` computes rank r's ``gelu(x @ w1_shard) @ w2_shard`` and returns it: the contribution of
the hidden features rank r owns, not y. With one rank the partial is y, so the mistake hides on a single GPU and
appears at tensor-parallel size 2. Megatron keeps the all-reduce in one place (``RowParallelLinear``'s forward,
``reduce_from_tensor_model_parallel_region``) so that no layer forgets it.

What the checker says: ``partial_sum``: the op's ``explain`` recomputes each rank's partial sum in float64 and
finds every rank's output equal to its own.
"""

from __future__ import annotations

import torch
import torch.distributed as dist  # noqa: F401  (what the kernel forgets to call)

from kernels.tp_mlp.reference import gelu_tanh
from workbench import comm, register


@register("tp_mlp", "wrong_no_all_reduce", backend="torch", expected_diagnosis="partial_sum",
          idea="KNOWN WRONG: the row-parallel partial sums are returned without the all-reduce.")
def wrong_no_all_reduce(x: torch.Tensor, w1_shard: torch.Tensor, w2_shard: torch.Tensor,
                        group: object = None) -> torch.Tensor:
    with comm.span("compute", note="x @ w1_shard, gelu, @ w2_shard"):
        partial = (gelu_tanh(x.float() @ w1_shard.float()) @ w2_shard.float()).to(x.dtype)
    return partial  # BUG: every rank holds a partial sum of y; the sum over ranks never happens
