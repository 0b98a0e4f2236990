"""Register the attention variants; ``LADDER`` is their teaching order.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("attention")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,  # CuPy array code: S and P materialised, the memory picture the notebook starts from
    v0_torch,  # materialized attention and one SDPA baseline per backend
    v1_numba_naive,
    v2_numba_flash,
    v3_cuda_flash_simt,
    v4_cuda_flash_wmma,
    v5_cuda_flash_mma,
    v6_triton_fa2,
    wrong,
)

LADDER = (
    "torch_sdpa", "cupy_materialized", "torch_naive", "torch_sdpa_math", "torch_sdpa_efficient", "torch_sdpa_flash",
    "torch_sdpa_cudnn", "numba_naive", "numba_flash", "cuda_flash_simt", "cuda_flash_wmma", "cuda_flash_mma",
    "triton_fa2", "wrong_no_rescale", "wrong_causal_off_by_one",
)
teaching_order("attention", LADDER)
