"""Known-wrong decode_attention_q8 kernel: ``triton_split`` with the V scale left out of its P V step.

``wrong_v_scale_forgotten`` runs ``q8_split_kernel`` (``v2_triton_split.py``) with its ``add_pv`` step replaced
by one that multiplies the softmax weights by the V codes alone. The kernel folds each dequantization scale into
a per-slot number instead of dequantizing D values per row: the K scale into the slot's score, the V scale into
the slot's weight. Folding one and forgetting the other is the slip: the scores are right, the weights are right,
and the output is a weighted mean of *codes* (int8 codes reach +-127, e4m3 codes +-448), tens of times too large,
by a factor that varies from token to token with each row's scale.

What the checker says: ``scale``. The output's magnitude is wrong everywhere; the op's ``explain`` recomputes
attention with the V scales set to 1 and finds the kernel's output there.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.decode_attention_q8.reference import OP_NAME
from kernels.decode_attention_q8.v2_triton_split import load_codes, split_attend
from workbench import register


@triton.jit
def add_pv_unscaled(acc, pr, vq_ptr, vs_ptr, rows, live, d, D):
    """Return acc + P V over one page."""
    vc = load_codes(vq_ptr, rows, live, d, D)
    return acc + tl.sum(pr[:, :, None] * vc[None, :, :], axis=1)  # BUG: V is codes * v_scale


@register(OP_NAME, "wrong_v_scale_forgotten", backend="triton", bf16_dot=False, expected_diagnosis="scale",
          idea="KNOWN WRONG: the P V step weights the V codes by the softmax alone: the V scale is never applied.")
def wrong_v_scale_forgotten(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor,
                            v_scale: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                            scale: float | None = None) -> torch.Tensor:
    return split_attend(q, k_q, k_scale, v_q, v_scale, block_table, seq_lens, scale, pv=add_pv_unscaled)
