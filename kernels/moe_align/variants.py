"""Register the moe_align variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("moe_align")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_cuda_align,  # shared-memory histograms, last-block scan, warp-aggregated atomic scatter
    v2_triton_align,  # tl.histogram counts, per-program tl.cumsum scan, tl.atomic_add scatter
    wrong,  # wrong_unpadded: forgets to round the groups up to the block
)

LADDER = (
    "torch_sort", "cuda_align", "triton_align", "wrong_unpadded",
)
teaching_order("moe_align", LADDER)
