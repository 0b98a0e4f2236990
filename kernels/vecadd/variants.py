"""Register the vecadd variants in teaching order (the torch baseline is registered with the contract).

The CuPy rung comes first: array code, then an ElementwiseKernel; then Numba, Triton and CUDA C.
"""

from . import v0_cupy, v1_numba, v2_triton, v3_cuda, wrong  # noqa: F401
