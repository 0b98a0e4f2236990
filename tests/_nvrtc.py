"""Compile CUDA C as ``cupy.RawKernel`` does on a GPU, with NVRTC and no GPU or driver (for tests/test_nvrtc.py).

On a GPU, ``workbench.cuda.RawKernel(path, name, options)`` hands cupy the text and options of
``workbench.cuda._gpu_source`` (a ``#line`` directive, ``-I<the .cu file's folder>``). How cupy 14.2 then compiles
(its option order, measured with cupy-cuda13x 14.2 imported without a driver) is in
:mod:`workbench.cuda._frontend`, which the CPU engine's front-end gate uses too; this module re-exports it for the
tests. NVRTC has no libc headers, so ``<stdint.h>`` fails here as it does under cupy, although g++ (the CPU engine)
and nvcc accept it.
"""

from __future__ import annotations

from workbench.cuda._frontend import Result, compile_like_cupy, cuda_root, cupy_options, load_nvrtc

__all__ = ["Result", "compile_like_cupy", "cuda_root", "cupy_options", "load_nvrtc"]
