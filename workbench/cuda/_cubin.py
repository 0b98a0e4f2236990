"""Build a cubin with nvcc for an architecture NVRTC-through-cupy cannot target (``sm_90a``: wgmma, setmaxnreg).

cupy picks ``-arch`` itself from the device (``sm_90`` on an H200) and rejects a second ``-arch`` option, but
wgmma and setmaxnreg exist only in the architecture-specific target ``sm_90a``. Kernels that need it are built
here with nvcc into a cubin, cached on disk by everything that goes into it, and loaded with
``cupy.RawModule(path=...)``. Nothing here needs a GPU, so CI builds the same cubin a GPU run would load.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from workbench.cuda._source import Source, load_source
from workbench.cuda.errors import CompileError
from workbench.cuda.toolchain import cache_dir, find_cuda_tool, nvcc_cache_key, nvcc_options, run_tool


def build_cubin(code: str | os.PathLike | Source, arch: str, options: Sequence[str] = ()) -> Path:
    """Compile ``code`` with nvcc for ``arch`` (e.g. ``"sm_90a"``) and return the cached cubin's path.

    Raises ToolchainNotFoundError when nvcc is missing and CompileError with nvcc's diagnostics.
    """
    src = code if isinstance(code, Source) else load_source(code)
    nvcc = find_cuda_tool("nvcc")
    key = nvcc_cache_key(src.text, src.path, nvcc, repr(tuple(options)), arch)
    out = cache_dir("cubin") / f"{key}-{arch}.cubin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_src = out.with_suffix(f".{os.getpid()}.cu")
    tmp_src.write_text(f'#include "{src.path}"\n' if src.path else src.text + "\n")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [nvcc, f"-arch={arch}", "-cubin", "-O3", "-std=c++17", *nvcc_options(options),
           "-o", str(tmp), str(tmp_src)]
    if src.path:
        cmd.insert(1, f"-I{os.path.dirname(src.path)}")
    try:
        r = run_tool(cmd, "nvcc")
        if r.returncode != 0:
            raise CompileError(f"nvcc failed to build {src.display_name} for {arch}:\n{r.stderr[-4000:]}",
                               r.stderr, src.path)
        os.replace(tmp, out)  # atomic: parallel workers never load half a cubin
    finally:
        tmp_src.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return out
