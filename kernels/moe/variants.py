"""Register the moe variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("moe")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,  # CuPy array code: route, then a Python loop over the experts (beside the torch_loop baseline)
    v1_numba_naive,  # one block per token: routes itself, reads its experts' weights once per token
    v2_cuda_permute,  # CUDA C: topk, align, permute, grouped SIMT GEMMs, SiLU-and-mul, combine (all through HBM)
    v3_triton_fused,  # vLLM-style: gather in the loads, SiLU-and-mul and the weighted combine in the epilogues
    v4_torch_grouped_mm,  # torch._grouped_mm (CUTLASS grouped GEMM on Hopper), where the installed torch has it
    wrong,  # wrong_combine_store: the combine stores where the top_k rows of a token must be summed (atomics)
)

LADDER = (
    "torch_loop", "cupy_loop", "numba_naive", "cuda_permute", "triton_fused", "torch_grouped_mm",
    "wrong_combine_store",
)
teaching_order("moe", LADDER)
