"""tp_mlp the Megatron way: each rank's hidden features, its partial sum of y, and torch's all-reduce.

Rank r multiplies x by its columns of w1 (no communication: GELU acts on each hidden feature alone), then its
hidden features by its rows of w2: a partial sum of y over the features it owns. ``dist.all_reduce`` adds the
partials in place (NCCL's ring or tree on GPUs, gloo's here); every rank ends with the whole y. The GEMMs run in
fp32 and the partial is all-reduced in the op's dtype, as Megatron all-reduces bf16 activations.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kernels.tp_mlp.reference import gelu_tanh
from workbench import comm, register


@register("tp_mlp", "megatron", backend="torch",
          idea="Column-parallel x @ w1_shard, GELU, row-parallel @ w2_shard (a partial y), one all_reduce(sum).")
def megatron(x: torch.Tensor, w1_shard: torch.Tensor, w2_shard: torch.Tensor, group: object = None) -> torch.Tensor:
    with comm.span("compute", note="x @ w1_shard, gelu, @ w2_shard"):
        partial = (gelu_tanh(x.float() @ w1_shard.float()) @ w2_shard.float()).to(x.dtype)
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    return partial
