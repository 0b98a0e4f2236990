"""Register the vecadd variants; ``LADDER`` is their teaching order.

The CuPy rung comes first: array code, then an ElementwiseKernel; then Numba, Triton and CUDA C.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("vecadd")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,
    v1_numba,
    v2_triton,
    v3_cuda,
    wrong,
)

LADDER = (
    "torch_add", "cupy_array", "cupy_elementwise", "numba_grid", "triton_block", "cuda_grid", "wrong_off_by_one_mask",
    "wrong_dropped_tail", "wrong_unmasked", "wrong_in_place", "wrong_no_bounds_check",
)
teaching_order("vecadd", LADDER)
