"""Compile CUDA C as ``cupy.RawKernel`` does on a GPU, with NVRTC and no GPU or driver (for tests/test_nvrtc.py).

On a GPU, ``workbench.cuda.RawKernel(path, name, options)`` hands cupy the text and options of
``workbench.cuda._gpu_source`` (a ``#line`` directive, ``-I<the .cu file's folder>``). cupy 14.2 then adds, in
``cupy._core.core.assemble_cupy_compiler_options`` and ``cupy.cuda.compiler``: its bundled CCCL include folders
first, ``--std=c++17`` unless an option sets ``-std``, ``-I<cupy's include folder>``, ``-I<CUDA root>/include``
(``CUDA_PATH``, else nvcc's root, else /usr/local/cuda), ``-ftz=true``, ``-arch=sm_<cc>`` (a cubin, so ptxas runs
too) and ``--device-as-default-execution-space``. Measured with cupy-cuda13x 14.2 imported without a driver:
``assemble_cupy_compiler_options(('-DX=1',))`` gave exactly that order. cupy's own folders (CCCL, ``cupy/*.cuh``)
are left out here: no kernel of this project includes them. NVRTC has no libc headers, so ``<stdint.h>`` fails
here as it does under cupy, although g++ (the CPU engine) and nvcc accept it.

The NVRTC library comes from the ``nvidia-cuda-nvrtc`` wheel (the same 13.0 release as the GPU image's nvcc),
loaded through ``cuda.bindings.nvrtc`` (cuda-bindings, installed with numba-cuda).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


def load_nvrtc():
    """Return ``cuda.bindings.nvrtc`` with its library loaded, or raise RuntimeError saying what to install."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise RuntimeError(f"cuda-bindings is not installed ({e}): pip install cuda-bindings") from e
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001  (cuda.pathfinder's DynamicLibNotFoundError and friends)
        raise RuntimeError(f"no NVRTC library ({type(e).__name__}: {str(e).splitlines()[0]}): "
                           "pip install nvidia-cuda-nvrtc (pyproject.toml pins it)") from e
    if int(err) != 0:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return nvrtc


def cuda_root() -> str | None:
    """Return the CUDA root cupy would find: CUDA_PATH, else nvcc's root, else /usr/local/cuda (if present)."""
    if os.environ.get("CUDA_PATH"):
        return os.environ["CUDA_PATH"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = Path(os.path.realpath(nvcc)).parent.parent
        if (root / "include" / "cuda_fp16.h").is_file():
            return str(root)
        # a wrapper script on PATH (exec /usr/local/cuda-13.0/bin/nvcc): fall through to the usual place
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda/include") else None


def cupy_options(options: tuple[str, ...], arch: str) -> tuple[str, ...]:
    """Return the NVRTC options cupy 14.2 compiles a RawKernel with, given the options workbench passes it."""
    opts = list(options)
    if not any("-std=" in o for o in opts):
        opts.append("--std=c++17")
    root = cuda_root()
    if root:
        opts.append(f"-I{os.path.join(root, 'include')}")
    return (*opts, "-ftz=true", f"-arch={arch}", "--device-as-default-execution-space")


@dataclass
class Result:
    ok: bool
    log: str
    image: bytes  # the cubin (-arch=sm_XX), or the PTX text (-arch=compute_XX)

    def has_kernel(self, name: str) -> bool:
        """Return True when the cubin's symbol table (or the PTX) holds the extern "C" kernel ``name``."""
        n = name.encode()
        return b"\0" + n + b"\0" in self.image or b".entry " + n + b"(" in self.image


def compile_like_cupy(text: str, filename: str, options: tuple[str, ...], arch: str = "sm_90") -> Result:
    """Compile ``text`` (as ``_gpu_source`` made it) for ``arch`` with cupy's options; return log and image.

    ``arch`` is ``sm_XX`` (a cubin: NVRTC runs ptxas, as cupy does on a GPU) or ``compute_XX`` (PTX only).
    """
    nvrtc = load_nvrtc()
    opts = [o.encode() for o in cupy_options(tuple(options), arch)]
    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), filename.encode(), 0, [], [])
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, log)
        image = b""
        if int(err) == 0:
            ptx = arch.startswith("compute_")
            _, size = (nvrtc.nvrtcGetPTXSize if ptx else nvrtc.nvrtcGetCUBINSize)(prog)
            image = b" " * size
            (nvrtc.nvrtcGetPTX if ptx else nvrtc.nvrtcGetCUBIN)(prog, image)
        return Result(int(err) == 0, log.decode(errors="replace").rstrip("\0 \n"), image)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
