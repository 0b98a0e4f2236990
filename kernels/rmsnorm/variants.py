"""Register the rmsnorm variants; ``LADDER`` is their teaching order.

The CuPy rung comes first (array code, then a ReductionKernel), then Triton and CUDA C.

``LADDER``, not the order of the imports, decides the order of ``wb.variants("rmsnorm")``:
the baselines (registered with the contract) first, known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v0_cupy,
    v1_triton_fused,
    v2_cuda_vec,
    wrong,  # wrong_mean_over_rows: divides a row's sum of squares by M instead of N
)

LADDER = (
    "torch_rms_norm", "cupy_array", "cupy_reduction", "triton_fused", "cuda_vec", "wrong_mean_over_rows",
)
teaching_order("rmsnorm", LADDER)
