"""Register the transpose variants in teaching order (the torch baseline is registered with the contract).

The classic wrong transpose (the shared tile read without ``__syncthreads()``) is exercise ``transpose-coalesce``'s
classic mistake, diagnosed ``race`` in tests/test_exercises.py.
"""

from . import v1_cuda, v2_triton  # noqa: F401
