"""Find and run the compilers, once: the C++ compiler of the CPU engine and the CUDA tools of inspect and cubins.

- ``find_cxx()``: $CXX, else g++, c++ or clang++ on PATH (the CPU engine builds CUDA C with it).
- ``find_cuda_tool(tool)``: nvcc, ptxas, cuobjdump or nvdisasm on PATH, under $CUDA_HOME/$CUDA_PATH/$CUDA_ROOT,
  /usr/local/cuda, the pip wheels (nvidia-cuda-nvcc), or, for all but nvcc, the copies Triton ships.
- ``cache_dir(kind)``: where compiled things are kept ($WORKBENCH_CACHE, else ~/.cache/kernel-workbench).
- ``run_tool``, ``nvcc_options``, ``nvcc_cache_key``: running a tool with a clear error, and keying its output.

The CPU engine, :func:`workbench.cuda.build_cubin`, :mod:`workbench.inspection` and ``workbench doctor`` all
import this module; it imports none of them, and nothing heavier than :mod:`workbench.cuda.errors`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from workbench.cuda.errors import ToolchainNotFoundError

__all__ = ["CUDA_TOOLS", "INSTALL_HINT", "cache_dir", "cuda_bin_dirs", "cxx_id", "find_cuda_tool", "find_cxx",
           "nvcc_cache_key", "nvcc_options", "run_tool", "triton_bin_dir"]

CUDA_TOOLS = ("nvcc", "ptxas", "cuobjdump", "nvdisasm")
INSTALL_HINT = (
    "Install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads; e.g. `sudo apt-get install "
    "cuda-nvcc-12-8`) or the pip wheel `pip install nvidia-cuda-nvcc` (nvcc + ptxas), then put its bin/ "
    "directory on PATH or set CUDA_HOME. No GPU is needed.")
_CXX_HINT = ("Install one, e.g. `sudo apt-get install g++` (Debian/Ubuntu), `conda install -c conda-forge "
             "cxx-compiler`, or Xcode command-line tools on macOS; or set $CXX.")


def cache_dir(kind: str = "cuda") -> Path:
    """Return (creating it) the cache folder ``kind`` ('cuda': CPU-engine builds, 'inspect', 'cubin').

    The root is $WORKBENCH_CACHE, else $XDG_CACHE_HOME/kernel-workbench (~/.cache/kernel-workbench).
    """
    root = os.environ.get("WORKBENCH_CACHE")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernel-workbench"
    d = base / kind
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------------------------------------------ C++
def find_cxx() -> str:
    """Return the C++ compiler to use ($CXX, else g++, c++ or clang++ on PATH)."""
    cand = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for c in cand:
        exe = shutil.which(c)
        if exe:
            return exe
    raise ToolchainNotFoundError(
        "the CPU engine needs a C++17 compiler to build CUDA kernels, and none was found "
        f"(looked for {', '.join(cand)} on PATH). {_CXX_HINT}")


_cxx_id_cache: dict[str, str] = {}


def cxx_id(cxx: str) -> str:
    """Return the first line of ``cxx --version`` (part of every cache key: a new compiler rebuilds)."""
    if cxx not in _cxx_id_cache:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        except OSError as e:  # pragma: no cover
            raise ToolchainNotFoundError(f"cannot run the C++ compiler {cxx!r}: {e}") from e
        _cxx_id_cache[cxx] = out.splitlines()[0] if out else cxx
    return _cxx_id_cache[cxx]


# ------------------------------------------------------------------------------------------------ CUDA tools
def cuda_bin_dirs() -> list[str]:
    """Return the folders searched for CUDA tools after PATH: $CUDA_HOME & co, /usr/local/cuda, pip wheels."""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT") if os.environ.get(v)]
    dirs += ["/usr/local/cuda/bin", "/opt/cuda/bin"]
    try:  # pip wheels: nvidia-cuda-nvcc(-cu12), and CUDA 13's nvidia/cu13 layout
        import nvidia  # type: ignore[import-not-found]

        for p in getattr(nvidia, "__path__", []):
            dirs += [os.path.join(p, "cuda_nvcc", "bin"), os.path.join(p, "cu13", "bin")]
    except ImportError:
        pass
    return dirs


def triton_bin_dir() -> str | None:
    """Return the folder of the ptxas/cuobjdump/nvdisasm Triton ships, or None."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if not spec or not spec.origin:
        return None
    d = Path(spec.origin).parent / "backends" / "nvidia" / "bin"
    return str(d) if d.is_dir() else None


def find_cuda_tool(tool: str, *, allow_triton: bool = True) -> str:
    """Return the path of a CUDA tool (nvcc, ptxas, cuobjdump, nvdisasm) or raise ToolchainNotFoundError.

    ``allow_triton=False`` skips the copies Triton ships (its nvcc-less bin/ folder is never used for nvcc).
    """
    if tool not in CUDA_TOOLS:
        raise ValueError(f"unknown CUDA tool {tool!r}: expected one of {CUDA_TOOLS}")
    exe = shutil.which(tool)
    if exe:
        return exe
    dirs = cuda_bin_dirs()
    tb = triton_bin_dir() if allow_triton and tool != "nvcc" else None
    if tb:
        dirs.append(tb)
    for d in dirs:
        p = os.path.join(d, tool)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise ToolchainNotFoundError(f"workbench.inspect needs the CUDA tool {tool!r}, which was not found on PATH "
                                 f"or in {', '.join(dirs) or 'the usual CUDA locations'}. {INSTALL_HINT}")


def run_tool(cmd: list[str], what: str, *, cwd: str | None = None, stdin: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``cmd`` capturing text output; a missing executable raises ToolchainNotFoundError naming ``what``."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, input=stdin)
    except FileNotFoundError as e:
        hint = INSTALL_HINT if Path(cmd[0]).name in CUDA_TOOLS else _CXX_HINT
        raise ToolchainNotFoundError(f"cannot run {cmd[0]!r} ({what}): {e}. {hint}") from e


def nvcc_options(options: Sequence[str]) -> list[str]:
    """Return ``options`` without the architecture flags (the caller passes its own ``-arch``)."""
    return [o for o in options if not re.match(r"^(-arch|--gpu-architecture|-gencode|--generate-code|-code)\b", o)]


_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def local_includes(text: str, directory: Path, _seen: set[Path] | None = None) -> list[Path]:
    """Return the files ``#include "..."`` pulls in, recursively, each resolved next to the file that includes it."""
    seen = set() if _seen is None else _seen
    found = []
    for name in _QUOTED_INCLUDE.findall(text):
        path = (directory / name).resolve()
        if path in seen or not path.is_file():
            continue  # an include nvcc finds on its -I path instead (not a file beside the source)
        seen.add(path)
        found.append(path)
        found += local_includes(path.read_text(errors="replace"), path.parent, seen)
    return found


def nvcc_cache_key(src_text: str, src_path: str | None, nvcc: str, *parts: str) -> str:
    """Return a hash of every input to one nvcc run: source, the local headers it includes, nvcc, and ``parts``.

    Local headers are followed through their own includes (``kernels/include/*.cuh`` from ``../include/``), so an
    edit to a shared header gives a new key.
    """
    keyed = [src_text, *parts, nvcc, str(os.path.getmtime(nvcc))]
    if src_path:
        for h in local_includes(src_text, Path(src_path).parent):
            keyed += [str(h), h.read_text(errors="replace")]
    return hashlib.sha256("\0".join(keyed).encode()).hexdigest()[:32]
