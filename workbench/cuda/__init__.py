"""One facade for raw CUDA C++ kernels: cupy on a GPU, the workbench's CPU engine otherwise.

``RawKernel(code, name)`` and ``RawModule(code=...)`` follow cupy's API and call convention
(``kernel(grid, block, args, shared_mem=0)``); ``code`` may be CUDA source text or a path to a ``.cu`` file.

* gpu mode: they wrap ``cupy.RawKernel`` / ``cupy.RawModule`` (cupy's semantics; file sources get a ``#line``
  directive so NVRTC diagnostics name the user's file).
* cpu mode: the same source is compiled with the system C++ compiler against the workbench's CUDA runtime
  headers and run on the CPU: every CUDA thread is a fiber (``__syncthreads`` is a real barrier), warps of 32
  lanes do real shuffles/votes, blocks run in parallel on all cores. Shared memory starts as 0xFF bytes (NaN,
  -1) in every block. ``checked=True`` launches (and every launch inside ``workbench._sanitize.sanitizing()``,
  which the checker uses) run compute-sanitizer's four tools at once: memcheck (global and shared memory),
  racecheck (shared and global memory), initcheck (shared memory) and synccheck (barriers and warp collectives not
  every named thread reaches); see :mod:`workbench.cuda._sanitizer`.
  Launches stop on Ctrl-C, past :func:`set_time_limit`, or when :func:`set_size_guard` estimates them too long.
  Inside :func:`workbench.profile` every launch runs a profile build instead and reports its exact memory counters
  (global requests and sectors, shared-memory wavefronts and bank conflicts, atomics, barriers).

Records of a checked launch's error (``err.records``, dicts):

* memcheck: tool, kind ('read'|'write'|'misaligned access'|'wild access'), space ('global'|'shared'), param and
  param_index (global), window ('static'|'dynamic') and variable (shared), offset, size, buffer_bytes, block,
  thread, line, file, kernel;
* racecheck: tool, hazard ('RAW'|'WAR'|'WAW'), space, offset, size, param/param_index (global) or
  window/variable/variable_offset (shared), block, thread, line, file (the later access), count, and
  first/second: {block, thread, warp, line, file, access ('read'|'write')};
* initcheck: tool, space ('shared'), window, variable, variable_offset, offset, size, block, thread, line,
  file, count.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from workbench import _sanitize
from workbench._mode import MODE
from workbench.cuda import _frontend, arch, errors
from workbench.cuda._cubin import build_cubin
from workbench.cuda._limits import set_size_guard, set_time_limit, size_guard, time_limit
from workbench.cuda._source import Source, has_inline_asm, load_source, rewrite_for_cpu
from workbench.cuda.errors import *  # noqa: F403  (every error class is part of workbench.cuda's API)
from workbench.cuda.errors import CompileError, CudaError

__all__ = [
    "MODE", "RawKernel", "RawModule", "Function", *errors.__all__,
    "arch", "build_cubin", "cache_dir", "clear_cache", "load_source", "has_inline_asm", "rewrite_for_cpu", "Source",
    "set_time_limit", "time_limit", "set_size_guard", "size_guard",
]

Dims = int | tuple[int, ...]


def cache_dir() -> str:
    """Return the on-disk cache of compiled CPU-engine kernels."""
    from workbench.cuda import _cpu_build

    return str(_cpu_build.cache_dir())


def clear_cache() -> None:
    """Delete the on-disk cache of compiled kernels and forget the in-process one."""
    import shutil

    from workbench.cuda import _cpu_build

    _cpu_build._loaded.clear()
    _cpu_build._images.clear()
    _cpu_build._rz_objects.clear()
    _cpu_build._prelude_names.clear()
    shutil.rmtree(_cpu_build.cache_dir(), ignore_errors=True)


_warned_checked = False


def _warn_checked_gpu() -> None:
    global _warned_checked
    if not _warned_checked:
        _warned_checked = True
        warnings.warn("checked=True only affects the CPU engine; on a GPU run the program under "
                      "`compute-sanitizer --tool memcheck python ...` instead", stacklevel=3)


def _gpu_source(src: Source, options: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    if not src.path:
        return src.text, tuple(options)
    text = f'#line 1 "{src.path}"\n' + src.text
    return text, tuple(options) + (f"-I{os.path.dirname(src.path)}",)


def _wrap_cupy_error(e: Exception, src: Source) -> Exception:
    name = type(e).__name__
    if name == "CompileException":
        log = str(getattr(e, "get_message", lambda: str(e))())
        return CompileError(f"compiling {src.display_name} with NVRTC failed:\n{log}", log, src.path)
    return e


class Function:
    """One kernel of a module; call it as ``f(grid, block, args, shared_mem=0)`` (cupy's convention)."""

    def __init__(self, module: RawModule, name: str) -> None:
        self._module = module
        self.name = name
        self.max_dynamic_shared_size_bytes = 0
        if MODE == "gpu":
            try:
                self._fn = module._cupy.get_function(name)
            except Exception as e:
                raise _wrap_cupy_error(e, module.source) from e
        else:
            # compile now the build the next launch uses (inside wb.profile: the counting build); raises for
            # unknown names
            from workbench import profile_counters as _profile

            if _profile.active():
                module._cpu_module(False, profile=True).kernel(name)
            else:
                module._cpu_module(module.checked or _sanitize.active()).kernel(name)
            # ... and for names cupy would not find in the GPU build (a __global__ without extern "C")
            _frontend.check_kernel_name(module._verdict, name, module.name_expressions, module.source.display_name)

    def __call__(self, grid: Dims, block: Dims, args: Sequence[Any], *, shared_mem: int = 0,
                 checked: bool | None = None, buffers: Sequence[Any] = (), **kwargs: Any) -> None:
        """Launch the kernel over ``grid`` blocks of ``block`` threads with ``args`` (a tuple).

        ``checked=True`` (or the module's ``checked``, or an active ``workbench._sanitize.sanitizing()``) runs
        the launch under memcheck, racecheck, initcheck and synccheck in cpu mode. ``buffers``: arrays the kernel
        reaches through pointers inside struct arguments, for :func:`workbench.profile` to count (cpu mode; ignored on a
        GPU, where ncu sees every access).
        """
        chk = bool(self._module.checked if checked is None else checked)
        if MODE == "gpu":
            if chk:  # asked for explicitly (the checker's sanitizing() switch is for the emulators only)
                _warn_checked_gpu()
            if self.max_dynamic_shared_size_bytes:
                self._fn.max_dynamic_shared_size_bytes = self.max_dynamic_shared_size_bytes
            return self._fn(grid, block, tuple(args), shared_mem=shared_mem, **kwargs)
        from workbench import profile_counters as _profile
        from workbench.cuda import _cpu

        if _profile.active():  # counting wins over checking: a profile build logs accesses, it does not check them
            self._profile_launch(grid, block, args, shared_mem, buffers)
            return None
        mod = self._module._cpu_module(chk or _sanitize.active())
        _cpu.launch(mod, mod.kernel(self.name), grid, block, args, shared_mem, self.max_dynamic_shared_size_bytes)
        return None

    def _profile_launch(self, grid: Dims, block: Dims, args: Sequence[Any], shared_mem: int,
                        buffers: Sequence[Any]) -> None:
        """Launch the profile build and hand its counters to the wb.profile call in progress."""
        from workbench import profile_counters as _profile
        from workbench.cuda import _cpu

        mod = self._module._cpu_module(False, profile=True)
        counts = _cpu.launch(mod, mod.kernel(self.name), grid, block, args, shared_mem,
                             self.max_dynamic_shared_size_bytes, tuple(buffers))
        other = (counts or {}).get("wb__uncounted_accesses.sum", 0)
        note = (f"{other} thread-level access(es) to memory that is neither shared memory nor a buffer passed as a "
                "pointer argument (a pointer inside a struct argument, a __device__ variable) were not counted"
                if other else "")
        _profile.record_launch(self.name, "cuda", grid=_cpu._dims(grid, "grid", self.name),
                               block=_cpu._dims(block, "block", self.name), metrics=counts, note=note)

    @property
    def num_params(self) -> int:
        """Return the number of kernel parameters (cpu mode)."""
        return len(self._module._cpu_module(self._module.checked).kernel(self.name).codes)

    def __repr__(self) -> str:
        return f"<workbench.cuda.Function {self.name!r} of {self._module.source.display_name} ({MODE} mode)>"


class RawModule:
    """A CUDA C++ module holding several kernels; ``get_function(name)`` returns a callable kernel.

    ``code`` is CUDA source text or a path to a ``.cu`` file. ``name_expressions`` lists template
    instantiations to export (e.g. ``["gemm<float, 64>"]``), as in cupy. ``checked=True`` makes CPU-engine
    launches run memcheck, racecheck, initcheck and synccheck (see the package docstring). Other keyword arguments go to
    ``cupy.RawModule`` (gpu mode).

    cpu mode: before the CPU engine runs it, the source goes through the GPU compiler's front end, NVRTC for
    sm_90 with cupy's options (:mod:`workbench.cuda._frontend`, concurrently with the C++ build, its verdict
    cached on disk); what a GPU refuses raises :class:`FrontendError` with NVRTC's log. ``frontend=False`` (or
    ``WORKBENCH_FRONTEND=0``) skips that gate, for CPU-only probes no GPU would compile.
    """

    def __init__(self, code: str | os.PathLike | None = None, *, options: Sequence[str] = (),
                 name_expressions: Sequence[str] | None = None, checked: bool = False, path: str | None = None,
                 frontend: bool | None = None, **cupy_kwargs: Any) -> None:
        if code is None and path is None:
            raise TypeError("RawModule needs code= (CUDA source text or a .cu path) or path= (cubin/ptx, gpu mode)")
        self.options = tuple(options)
        self.name_expressions = tuple(name_expressions or ())
        self.checked = bool(checked)
        self.frontend = _frontend.enabled(frontend)
        self._verdict: _frontend.Verdict | None = None
        self._gated = False
        self._label = ""  # RawKernel names its kernel here, for the gate's messages
        self._gate_options: tuple[str, ...] = ()  # RawKernel(arch=...): the gate compiles for that target
        self._cpu: dict[bool | str, Any] = {}
        if code is None:  # cupy's path= (a cubin/ptx file): GPU only
            if MODE != "gpu":
                raise CudaError(f"RawModule(path={path!r}) loads a compiled cubin/PTX, which needs a GPU; "
                                "pass the .cu source as code= to run it on the CPU engine")
            import cupy

            self.source = Source("", path)
            self._cupy = cupy.RawModule(path=path, options=self.options, name_expressions=name_expressions,
                                        **cupy_kwargs)
            return
        self.source = code if isinstance(code, Source) else load_source(code)
        self.code = self.source.text
        if MODE == "gpu":
            import cupy

            text, opts = _gpu_source(self.source, self.options)
            try:
                self._cupy = cupy.RawModule(code=text, options=opts, name_expressions=name_expressions,
                                            **cupy_kwargs)
            except Exception as e:
                raise _wrap_cupy_error(e, self.source) from e

    def _cpu_module(self, checked: bool, profile: bool = False) -> Any:
        from workbench.cuda import _cpu_build

        key = "profile" if profile else checked
        if key not in self._cpu:
            self._cpu[key] = _cpu_build.CpuModule(self.source, self.options, None, self.name_expressions,
                                                  checked and not profile, profile=profile)
        if self._gated or not self.frontend:
            _frontend.check(self._verdict, self.source, self._label)
            return self._cpu[key].compile()
        return self._gate_while(self._cpu[key].compile)

    def _gate_while(self, build: Any) -> Any:
        """Run the NVRTC gate in a thread while ``build()`` runs; raise FrontendError if NVRTC refuses the source.

        NVRTC releases the GIL, and the C++ build is a child process, so the two overlap. When both fail, the
        FrontendError (what the GPU says) quotes the CPU engine's message too; a CPU-engine error of a source that
        NVRTC accepts is raised as it is.
        """
        box: dict[str, Any] = {}

        def gate() -> None:
            try:
                text, opts = _gpu_source(self.source, self.options + self._gate_options)
                box["v"] = _frontend.verdict(text, self.source.path, self.source.display_name, opts,
                                             self.name_expressions)
            except BaseException as e:  # noqa: BLE001  (handed to the caller's thread)
                box["e"] = e

        t = threading.Thread(target=gate, name="workbench-nvrtc-gate", daemon=True)
        t.start()
        try:
            out = build()
        except CompileError as e:
            t.join()
            self._settle(box, e)
            raise
        t.join()
        self._settle(box)
        return out

    def _settle(self, box: dict[str, Any], cpu_error: CompileError | None = None) -> None:
        """Record the gate's verdict (or re-raise its unexpected error) and raise FrontendError on a refusal."""
        if "e" in box:
            raise box["e"]
        self._verdict, self._gated = box.get("v"), True
        _frontend.check(self._verdict, self.source, self._label, cpu_error)

    def compile(self) -> RawModule:
        """Compile now (otherwise the first get_function/launch does)."""
        if MODE == "gpu":
            try:
                self._cupy.compile()
            except Exception as e:
                raise _wrap_cupy_error(e, self.source) from e
        else:
            self._cpu_module(self.checked)
        return self

    def get_function(self, name: str) -> Function:
        """Return the kernel ``name`` (an extern "C" name, or one of the name_expressions)."""
        return Function(self, name)

    @property
    def kernel_names(self) -> list[str]:
        """Return the kernels this module exports (cpu mode: compiled table; gpu: from the source)."""
        if MODE == "gpu":
            from workbench.cuda._source import find_kernels

            return [k.name for k in find_kernels(self.source.text) if not k.is_template] + list(self.name_expressions)
        return list(self._cpu_module(self.checked).kernels)

    def __repr__(self) -> str:
        return f"<workbench.cuda.RawModule {self.source.display_name} ({MODE} mode)>"


class RawKernel:
    """One CUDA C++ kernel, called as ``kernel(grid, block, args, shared_mem=0)`` like ``cupy.RawKernel``.

    ``code`` is CUDA source text or a path to a ``.cu`` file; ``name`` the (extern "C") kernel name, or a
    template instantiation such as ``"softmax<128>"``. ``checked=True`` makes CPU-engine launches run
    compute-sanitizer's memcheck, racecheck, initcheck and synccheck, raising MemcheckError, RaceError,
    UninitializedError or SynccheckError with the kernel, block, thread, offset and source line.
    ``arch="sm_90a"`` (gpu mode) builds the kernel with nvcc for that exact target instead of NVRTC, for
    instructions that only architecture-specific targets have (wgmma, setmaxnreg); the name must be extern "C".
    ``frontend=False``: skip the NVRTC gate of cpu mode (see :class:`RawModule`).
    """

    def __init__(self, code: str | os.PathLike, name: str, options: Sequence[str] = (), *, checked: bool = False,
                 arch: str | None = None, frontend: bool | None = None, **cupy_kwargs: Any) -> None:
        self.name = name
        self.arch = arch
        self.options = tuple(options)
        self.checked = bool(checked)
        self.max_dynamic_shared_size_bytes = 0
        exprs = (name,) if "<" in name else ()
        self.source = load_source(code)
        self.code = self.source.text
        self._fn: Function | None = None
        if MODE == "cpu":
            self._module = RawModule(self.source, options=options, name_expressions=exprs, checked=checked,
                                     frontend=frontend)
            self._module._label = f"kernel {name!r} of {self.source.display_name}"
            if arch:  # on a GPU nvcc builds it for exactly this target (wgmma, setmaxnreg: sm_90a)
                self._module._gate_options = (f"-arch={arch}",)
        else:
            import cupy

            text, opts = _gpu_source(self.source, self.options)
            if arch:
                if exprs:
                    raise CudaError(f"RawKernel(arch={arch!r}) builds extern \"C\" kernels only, not {name!r}")
                self._gpu_mod = cupy.RawModule(path=str(build_cubin(self.source, arch, self.options)))
            elif exprs:
                self._gpu_mod = cupy.RawModule(code=text, options=opts, name_expressions=list(exprs), **cupy_kwargs)
            else:
                self._cupy = cupy.RawKernel(text, name, options=opts, **cupy_kwargs)

    def compile(self) -> RawKernel:
        """Compile now (otherwise the first launch does); raises CompileError with the compiler diagnostics."""
        if MODE == "gpu":
            try:
                if hasattr(self, "_cupy"):
                    self._cupy.compile()
                else:
                    self._gpu_mod.get_function(self.name)
            except Exception as e:
                raise _wrap_cupy_error(e, self.source) from e
        else:
            self._function()
        return self

    def _function(self) -> Function:
        if self._fn is None:
            self._fn = self._module.get_function(self.name)
        return self._fn

    def __call__(self, grid: Dims, block: Dims, args: Sequence[Any], *, shared_mem: int = 0,
                 checked: bool | None = None, buffers: Sequence[Any] = (), **kwargs: Any) -> None:
        """Launch over ``grid`` blocks of ``block`` threads; ``args`` is a tuple matching the kernel's params.

        ``buffers``: arrays reached through pointers inside struct arguments (see :meth:`Function.__call__`).
        """
        if MODE == "gpu":
            if checked or self.checked:
                _warn_checked_gpu()
            try:
                if hasattr(self, "_cupy"):
                    if self.max_dynamic_shared_size_bytes:
                        self._cupy.max_dynamic_shared_size_bytes = self.max_dynamic_shared_size_bytes
                    return self._cupy(grid, block, tuple(args), shared_mem=shared_mem, **kwargs)
                fn = self._gpu_mod.get_function(self.name)
                if self.max_dynamic_shared_size_bytes:
                    fn.max_dynamic_shared_size_bytes = self.max_dynamic_shared_size_bytes
                return fn(grid, block, tuple(args), shared_mem=shared_mem, **kwargs)
            except Exception as e:
                raise _wrap_cupy_error(e, self.source) from e
        fn = self._function()
        fn.max_dynamic_shared_size_bytes = self.max_dynamic_shared_size_bytes
        return fn(grid, block, args, shared_mem=shared_mem, checked=checked, buffers=buffers)

    def __repr__(self) -> str:
        return f"<workbench.cuda.RawKernel {self.name!r} of {self.source.display_name} ({MODE} mode)>"
