"""Register the gemm variants in teaching order (the torch baseline is registered with the contract).

cupy.matmul sits beside the torch baseline (cuBLAS from CuPy); then Numba, CUDA C and Triton.
"""

from . import v0_cupy, v1_numba, v2_cuda, v3_triton, wrong, wrong_more  # noqa: F401
