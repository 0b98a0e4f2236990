"""CuTe DSL plumbing the ``cute`` variants share: the target arch, fake tensors, compile caches, the inspect spec.

NVIDIA's CuTe DSL (``nvidia-cutlass-dsl``) traces a Python kernel into MLIR and compiles it to PTX and a cubin in
the same process; it has no CPU emulator, so a CuTe variant runs on a GPU only. Without one it still *compiles*:
``cute.compile`` of a ``@cute.jit`` host function on fake tensors (``cute.runtime.make_fake_compact_tensor``) needs
no driver, which is how ``wb.inspect`` reads a CuTe kernel's registers, spills, shared memory and SASS here.

* :func:`arch` is the target: the GPU's own on a GPU (the DSL detects it), else ``$CUTE_DSL_ARCH`` or ``sm_90a``.
* :func:`compiled` compiles a host function once per key (dtype, shape class) and caches the result: a GEMM's
  shapes are dynamic (``sym_int``), so one compile serves every M, N, K.
* :func:`cute_spec` is a variant's ``wb.inspect`` spec: ``{"kind": "cute", "compile": fn(arch) -> compiled, ...}``.
* :func:`to_cute` wraps a torch tensor for a launch (dlpack, no copy) with its layout marked dynamic.
* :func:`launch_aot` runs a kernel's ahead-of-time build (``kernels/_cute_aot.py``) where the DSL is not installed.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import tempfile
import threading
from collections.abc import Callable, Hashable
from typing import Any

import torch

from workbench import MODE

DEFAULT_ARCH = "sm_90a"  # Hopper with its architecture-specific features (wgmma, setmaxnreg): the H200's target

_compiled: dict[Hashable, Any] = {}
_lock = threading.Lock()


def arch() -> str:
    """Return the target the DSL compiles for: the GPU's own on a GPU, else ``$CUTE_DSL_ARCH`` or ``sm_90a``."""
    if MODE == "gpu" and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return os.environ.get("CUTE_DSL_ARCH") or DEFAULT_ARCH


def import_cute() -> tuple[Any, Any]:
    """Import and return ``(cutlass, cutlass.cute)``; without a GPU first point the DSL at :func:`arch`.

    The DSL asks the driver for the GPU's arch on first use unless ``CUTE_DSL_ARCH`` names one; with no GPU there
    is no driver to ask, so the variable is set (to ``sm_90a`` unless the caller set it) before the import.
    """
    if not (MODE == "gpu" and torch.cuda.is_available()):
        os.environ.setdefault("CUTE_DSL_ARCH", DEFAULT_ARCH)
    import cutlass
    import cutlass.cute as cute
    import cutlass.memory  # noqa: F401  (SmemAllocator)

    if not (MODE == "gpu" and torch.cuda.is_available()):
        # Imported earlier without the variable (a test's importorskip, a learner's own import), the DSL fell back
        # to its default target (sm_100a); compiling for the wrong arch fails, so point it at ours.
        from cutlass.cutlass_dsl import CuTeDSL

        CuTeDSL._get_dsl().envar.arch = arch()
    return cutlass, cute


def cutlass_dtype(dtype: torch.dtype) -> Any:
    """Return the CuTe DSL element type of a torch float dtype (``cutlass.BFloat16`` for ``torch.bfloat16``)."""
    cutlass, _ = import_cute()
    table = {torch.float32: cutlass.Float32, torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}
    if dtype not in table:
        raise TypeError(f"CuTe DSL kernels here take float32, float16 or bfloat16, not {dtype}")
    return table[dtype]


@functools.cache
def dsl_installed() -> bool:
    """Return True when the CuTe DSL is importable here (looked up, not imported)."""
    return importlib.util.find_spec("cutlass") is not None


def launch_aot(name: str, a: torch.Tensor, b: tuple, c: torch.Tensor) -> None:
    """Launch the ahead-of-time build of ``name`` (``kernels/_cute_aot.py``) on torch's current stream: for a GPU
    machine without the DSL. ``b`` is (tensor, its extents as the kernel sees them, its runtime stride)."""
    from kernels import _cute_aot

    bt, bshape, bstride = b
    run = _cute_aot.launcher(name, a.dtype)
    run((a.data_ptr(), a.shape[0], a.shape[1], a.stride(0)), (bt.data_ptr(), *bshape, bstride),
        (c.data_ptr(), c.shape[0], c.shape[1], c.stride(0)), torch.cuda.current_stream().cuda_stream)


def compiled(key: Hashable, build: Callable[[], Any]) -> Any:
    """Return ``build()``'s compiled kernel, built once per process per ``key`` (thread-safe)."""
    hit = _compiled.get(key)
    if hit is not None:
        return hit
    with _lock:
        if key not in _compiled:
            _compiled[key] = build()
        return _compiled[key]


def compile_with_artifacts(host: Any, *args: Any, target: str | None = None) -> Any:
    """Return ``cute.compile(host, *args)`` for ``target`` keeping its PTX and cubin (``.__ptx__``, ``.__cubin__``).

    The DSL keeps them only when asked to dump them; the dump goes to a throw-away folder.
    """
    _, cute = import_cute()
    target = target or arch()
    with tempfile.TemporaryDirectory(prefix="wb-cute-") as td:
        return cute.compile(host, *args, options=f"--keep-ptx --keep-cubin --dump-dir={td} --gpu-arch={target}")


def fake_stream() -> Any:
    """Return a stand-in CUDA stream for a compile without a GPU."""
    _, cute = import_cute()
    return cute.runtime.make_fake_stream()


def current_stream() -> Any:
    """Return torch's current CUDA stream as the driver handle a CuTe launch takes."""
    import cuda.bindings.driver as cuda

    return cuda.CUstream(torch.cuda.current_stream().cuda_stream)


def to_cute(t: torch.Tensor, leading_dim: int, align: int = 16) -> Any:
    """Wrap ``t`` (no copy) as a CuTe tensor whose shape and strides are runtime values; ``leading_dim`` has stride 1.

    ``align`` is the byte alignment the kernel may assume of the base address (16: vector loads, TMA).
    """
    _, cute = import_cute()
    return cute.runtime.from_dlpack(t, assumed_align=align).mark_layout_dynamic(leading_dim=leading_dim)


def cute_spec(name: str, compile_fake: Callable[[torch.dtype, str], Any], dtype: torch.dtype, threads_per_block: int,
              dynamic_smem: int = 0, target: str = DEFAULT_ARCH) -> dict:
    """Return a CuTe variant's ``wb.inspect`` spec: its ``compile_fake(dtype, arch)``, compiled once per arch.

    ``dynamic_smem`` is the shared memory the launch asks for (CuTe kernels take theirs dynamically, which ptxas's
    report does not show); ``target`` the arch a plain ``wb.inspect(v)`` (which asks for sm_90) compiles for.
    """
    def compile_for(arch: str) -> Any:
        return compiled(("inspect", name, dtype, arch), lambda: compile_fake(dtype, arch))

    return {"kind": "cute", "name": name, "compile": compile_for, "threads_per_block": threads_per_block,
            "dynamic_smem": dynamic_smem, "arch": target, "key": str(dtype)}
