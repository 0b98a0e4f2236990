"""Ahead-of-time builds of the CuTe gemm kernels, for a GPU machine whose Python lacks the CuTe DSL.

The DSL's compiler is a 92 MB wheel (``nvidia-cutlass-dsl-libs-cu12``), more than a GPU run may carry (64 MiB in
all). But a compiled CuTe function exports to C (``export_to_c``): a header and a small object holding the host
launcher (it builds the TMA descriptors) and the sm_90a cubin. Here, where the DSL is, :func:`build` exports each
kernel, wraps it in a two-function C shim and links it with the DSL's static runtime shim and CUDA's static runtime
into one self-contained ``.so`` (about 1 MB; it needs only the driver, ``libcuda.so.1``). There, :func:`launcher`
loads it with ``ctypes``: the variants run the same kernels without the DSL.

    python -m kernels._cute_aot [--out out/cute-aot]      # then carry out/cute-aot to the GPU machine

``$WB_CUTE_AOT`` names the folder (default ``out/cute-aot``). Each build records the hash of the kernel sources it
came from: a library built from other sources is not used (the variant then says to rebuild it).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
#: (variant, dtype): the builds a GPU machine without the DSL can run; each is one kernel of one dtype.
BUILDS = (("cute_simt", torch.float32), ("cute_simt", torch.float16), ("cute_simt", torch.bfloat16),
          ("cute_wgmma_tma", torch.float16), ("cute_wgmma_tma", torch.bfloat16))
MODULES = {"cute_simt": "kernels.gemm.v5_cute_simt", "cute_wgmma_tma": "kernels.gemm.v6_cute_wgmma_tma"}
_DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
MANIFEST = "manifest.json"


def aot_dir() -> Path:
    """Return the folder of the built libraries: ``$WB_CUTE_AOT`` or ``out/cute-aot``."""
    return Path(os.environ.get("WB_CUTE_AOT") or ROOT / "out" / "cute-aot")


@functools.cache
def sources_hash() -> str:
    """Return the hash of the files a build depends on (the kernels and this plumbing), once per process."""
    h = hashlib.sha256()
    files = [ROOT / "kernels" / "_cute.py", Path(__file__)]
    files += [ROOT / (m.replace(".", "/") + ".py") for m in MODULES.values()]
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def tag(name: str, dtype: torch.dtype) -> str:
    """Return the file stem and C prefix of one build: ``cute_wgmma_tma_bf16``."""
    return f"{name}_{_DT[dtype]}"


# ------------------------------------------------------------------------------------------------------- build
_SHIM = """
#include "{stem}.h"

static {p}_Kernel_Module_t wb_module;
static int wb_loaded = 0;

/* Load the embedded cubin on every device once: 0, or the CUDA error (the header's loader only prints them). */
int {stem}_load(void) {{
    if (wb_loaded) return 0;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) return (int)err;
    if (n < 1) return (int)cudaErrorNoDevice;
    cudaLibrary_t *libraryPtr = &(wb_module.module);
    cudaError_t ret = cudaSuccess;
    struct {{ cudaLibrary_t **libraryPtr; cudaError_t *ret; }} initArgs = {{&libraryPtr, &ret}};
    _mlir_{p}_cuda_init((void **)(&initArgs));
    if (ret != cudaSuccess) return (int)ret;
    int32_t device_id = 0;
    struct {{ cudaLibrary_t **library; int32_t *device_id; cudaError_t *ret; }} loadArgs =
        {{&libraryPtr, &device_id, &ret}};
    for (int32_t i = 0; i < n; i++) {{
        device_id = i;
        _mlir_{p}_cuda_load_to_device((void **)(&loadArgs));
        if (ret != cudaSuccess) return (int)ret;
    }}
    wb_loaded = 1;
    return 0;
}}

/* Launch on ``stream``: each tensor is its data pointer, its 2 extents and its one runtime stride (elements). */
int {stem}_launch(void *a, int32_t a0, int32_t a1, int64_t as, void *b, int32_t b0, int32_t b1, int64_t bs,
                  void *c, int32_t c0, int32_t c1, int64_t cs, void *stream) {{
    {p}_Tensor_a_t ta = {{a, {{a0, a1}}, {{as}}}};
    {p}_Tensor_b_t tb = {{b, {{b0, b1}}, {{bs}}}};
    {p}_Tensor_c_t tc = {{c, {{c0, c1}}, {{cs}}}};
    return (int)cute_dsl_{p}_wrapper(&wb_module, &ta, &tb, &tc, (cudaStream_t)stream);
}}
"""


def _cuda_home() -> Path:
    """Return the CUDA toolkit holding ``include/cuda_runtime.h`` and ``libcudart_static.a`` (from nvcc's place)."""
    nvcc = shutil.which("nvcc")
    cands = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    if nvcc:
        real = Path(nvcc).resolve().parent.parent
        cands += [real, Path(nvcc).parent.parent]
    cands += sorted(Path("/usr/local").glob("cuda*"), reverse=True)
    for c in cands:
        if (c / "include" / "cuda_runtime.h").is_file() and any(c.glob("lib*/libcudart_static.a")):
            return c
    raise FileNotFoundError("kernels._cute_aot: no CUDA toolkit with include/cuda_runtime.h and libcudart_static.a "
                            "(set $CUDA_HOME)")


def _link(stem: str, work: Path, out: Path) -> Path:
    """Compile the shim of ``stem`` and link it with its object into ``out/<stem>.so``."""
    from kernels import _cute

    cutlass, _ = _cute.import_cute()
    cuda = _cuda_home()
    cudart = next(cuda.glob("lib*/libcudart_static.a"))
    dsl_lib = Path(cutlass.__file__).resolve().parents[2] / "cu12" / "lib" / "libcuda_dialect_runtime_static.a"
    if not dsl_lib.is_file():
        found = list(Path(cutlass.__file__).resolve().parents[2].glob("cu*/lib/libcuda_dialect_runtime_static.a"))
        if not found:
            raise FileNotFoundError("kernels._cute_aot: the DSL's libcuda_dialect_runtime_static.a is missing")
        dsl_lib = found[0]
    (work / f"{stem}_shim.c").write_text(_SHIM.format(stem=stem, p=f"wb_{stem}"))
    so = out / f"{stem}.so"
    cmd = [os.environ.get("CC", "gcc"), "-O2", "-shared", "-fPIC", f"-I{cuda / 'include'}", f"-I{work}",
           "-o", str(so), str(work / f"{stem}_shim.c"), str(work / f"{stem}.o"), str(dsl_lib), str(cudart),
           "-ldl", "-lpthread", "-lrt", "-Wl,--exclude-libs,ALL"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kernels._cute_aot: linking {so.name} failed:\n{' '.join(cmd)}\n{r.stderr[-3000:]}")
    return so


def build(out: Path | None = None, builds: tuple = BUILDS) -> Path:
    """Export and link every build in ``builds`` into ``out`` (default :func:`aot_dir`); return the manifest path."""
    import importlib

    from kernels import _cute

    cutlass, _ = _cute.import_cute()  # first: it points the DSL at sm_90a when there is no GPU
    out = Path(out or aot_dir())
    out.mkdir(parents=True, exist_ok=True)
    done = {}
    with tempfile.TemporaryDirectory(prefix="wb-cute-aot-") as td:
        work = Path(td)
        for name, dtype in builds:
            stem = tag(name, dtype)
            fn = importlib.import_module(MODULES[name]).compile_fake(dtype, "sm_90a")
            fn.export_to_c(str(work), stem, f"wb_{stem}")  # names: wb_<stem>_Tensor_a_t, cute_dsl_wb_<stem>_wrapper
            done[stem] = _link(stem, work, out).name
    manifest = out / MANIFEST
    manifest.write_text(json.dumps({"sources": sources_hash(), "arch": "sm_90a", "dsl": cutlass.__version__,
                                    "libraries": done}, indent=1))
    return manifest


# ------------------------------------------------------------------------------------------------------ launch
def problem(name: str, dtype: torch.dtype | None = None) -> str | None:
    """Return why no AOT build of ``name`` (and ``dtype``) can be used here, or None."""
    m = aot_dir() / MANIFEST
    if not m.is_file():
        return f"no AOT build in {aot_dir()} (build one where the DSL is: python -m kernels._cute_aot)"
    doc = json.loads(m.read_text())
    if doc.get("sources") != sources_hash():
        return (f"the AOT build in {aot_dir()} came from other kernel sources: rebuild it "
                "(python -m kernels._cute_aot)")
    have = doc.get("libraries", {})
    if not (any(tag(name, d) in have for d in _DT) if dtype is None else dtype in _DT and tag(name, dtype) in have):
        return f"the AOT build in {aot_dir()} has no {name} for {dtype}"
    return None


@functools.cache
def _library(stem: str) -> Any:
    """Load ``<stem>.so`` and its embedded cubin (once per process)."""
    lib = ctypes.CDLL(str(aot_dir() / f"{stem}.so"))
    i32, i64, ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    launch = getattr(lib, f"{stem}_launch")
    launch.argtypes = [ptr, i32, i32, i64] * 3 + [ptr]
    launch.restype = ctypes.c_int
    load = getattr(lib, f"{stem}_load")
    load.restype = ctypes.c_int
    err = load()
    if err:
        raise RuntimeError(f"{stem}.so: loading its cubin failed with CUDA error {err}")
    return launch


def launcher(name: str, dtype: torch.dtype) -> Callable[..., None]:
    """Return ``launch(a, b, c, stream)`` of the AOT build of ``name`` for ``dtype``: tensors as the variant's
    ``cute_args`` lays them out, each (data pointer, extents, runtime stride); raises when none can be used."""
    why = problem(name, dtype)
    if why:
        raise RuntimeError(f"gemm/{name}: the CuTe DSL is not installed and {why}")
    fn = _library(tag(name, dtype))

    def launch(a: tuple, b: tuple, c: tuple, stream: int) -> None:
        err = fn(*a, *b, *c, ctypes.c_void_p(stream))
        if err:
            raise RuntimeError(f"gemm/{name}: the AOT launch failed with error {err}")

    return launch


def main(argv: list[str] | None = None) -> int:
    """Build every AOT library into ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=None, help=f"folder (default {aot_dir()})")
    a = p.parse_args(argv)
    m = build(a.out)
    print(f"wrote {m.parent} ({', '.join(json.loads(m.read_text())['libraries'].values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
