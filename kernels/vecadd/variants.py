"""Register the vecadd variants; ``LADDER`` (not import order) is their teaching order.

The CuPy rung first (array code, then an ElementwiseKernel), then Numba, Triton and CUDA C.
"""

from workbench.registry import teaching_order

from . import v0_cupy, v1_numba, v2_triton, v3_cuda, wrong  # noqa: F401

LADDER = (
    "torch_add", "cupy_array", "cupy_elementwise", "numba_grid", "triton_block", "cuda_grid", "wrong_off_by_one_mask",
    "wrong_dropped_tail", "wrong_unmasked", "wrong_in_place", "wrong_no_bounds_check",
)
teaching_order("vecadd", LADDER)
