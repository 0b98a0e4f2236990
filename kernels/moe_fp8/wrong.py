"""Known-wrong moe_fp8 variant: the recipe with the second quantization left out, for the checker to catch.

``wrong_bf16_intermediate`` feeds the down projection the SwiGLU output as computed (float32, then bf16 as a
kernel would store it) instead of requantizing it to e4m3 in 1x128 groups. It is the more accurate layer, and
that is the point: the contract is the recipe a deployed fp8 model runs (DeepSeek-V3's inference kernels
requantize there), so a kernel that skips the step returns different numbers from the checkpoint's own. The
difference is e4m3's rounding of every intermediate element (up to 1/16 relative), ~3% of |out| per element and
4-5x the tolerance at its worst. What the checker says: ``precision``: no tail or tile pattern, every element a
little off (the middle one by over a fifth of its tolerance) and none far off.
"""

from __future__ import annotations

import torch

from kernels.moe_fp8.reference import _experts
from workbench import register


@register("moe_fp8", "wrong_bf16_intermediate", backend="torch", expected_diagnosis="precision",
          idea="KNOWN WRONG: skips the 1x128 e4m3 requantization of silu(gate) * up before the down projection.")
def wrong_bf16_intermediate(x: torch.Tensor, router_logits: torch.Tensor, w1q: torch.Tensor, w1s: torch.Tensor,
                            w2q: torch.Tensor, w2s: torch.Tensor, top_k: int, renormalize: bool = True
                            ) -> torch.Tensor:
    return _experts(x, router_logits, w1q, w1s, w2q, w2s, top_k, renormalize, torch.float32,
                    requant=False).to(x.dtype)
