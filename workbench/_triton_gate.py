"""Make pasted Triton code run in cpu mode as on the reference GPU, and refuse what that GPU's compiler refuses.

Installed once by :func:`install` (from ``workbench._triton_interp.install``, i.e. ``import workbench`` in cpu mode):

- **A driver.** ``triton.runtime.driver.active`` answers as on the project's reference GPU (NVIDIA H200, sm_90):
  ``get_active_torch_device()`` is ``torch.device("cpu")`` (where the interpreter's tensors live),
  ``get_current_target()`` is ``GPUTarget("cuda", 90, 32)``, and ``utils.get_device_properties(...)`` gives the
  H200's figures from :mod:`workbench.hardware` and :mod:`workbench.cuda.arch`, marked ``"source"``: they are the
  reference GPU's, not this machine's (which has no GPU).
- **The front-end gate.** Before a launch runs under the interpreter, the kernel is compiled for sm_90 once per
  specialisation, exactly as a GPU launch would specialise it (pointer dtypes, integer widths, which pointers and
  integers are multiples of 16, constexpr values, ``num_warps``/``num_stages``), with Triton's own AOT compile
  (``triton.compile`` for ``GPUTarget("cuda", 90, 32)``, no GPU needed). A launch the GPU would refuse (an 8x8
  ``tl.dot``, a Python or numpy call inside the kernel, ``tl.arange`` of a non-constexpr, more shared memory than
  an H200 block may have) raises :class:`workbench.cuda.errors.CompileError` carrying Triton's message. Verdicts are
  cached in memory and on disk (``cache_dir("triton-gate")``, keyed as Triton keys its own compile cache: the
  kernel's source with its @jit callees, signature, constexprs, options, Triton and ptxas versions).
  ``WORKBENCH_FRONTEND=0`` (or :func:`frontend_gate` ``(False)``) skips the gate, for the CPU-only interpreter
  features a test needs; the CUDA C front end of ``workbench.cuda`` reads the same variable.
- **autotune.** ``@triton.autotune`` with several configs picks, per tuning key, the first config (after
  ``prune_configs_by``) that compiles for sm_90 and runs, without timing: emulated time says nothing about a GPU. It
  says so once per kernel (a :class:`CpuAutotuneNote` warning). Hooks, ``reset_to_zero``, ``restore_value``, keys
  and ``best_config`` behave as on a GPU.
- **warmup.** ``kernel.warmup(*args, grid=..., **meta)`` returns a :class:`WarmedKernel`: the sm_90 compile of that
  specialisation, with ``n_regs``, ``n_spills``, ``metadata.shared`` from ptxas, and ``kernel[grid](*args)``
  launching it under the interpreter.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.cuda.errors import CompileError

ENV_VAR = "WORKBENCH_FRONTEND"
REFERENCE_GPU = "H200"
_ARCH = "sm_90"
_CC = 90

_OVERRIDE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("wb_frontend_gate", default=None)
_DONE = False


class CpuAutotuneNote(UserWarning):
    """cpu mode: ``@triton.autotune`` picked the first config that runs, not the fastest (emulated time ranks none)."""


class ReferenceGpuNote(UserWarning):
    """cpu mode: Triton's device properties are the reference GPU's (H200, sm_90), not this machine's."""


def enabled() -> bool:
    """Return whether Triton launches go through the sm_90 front-end gate now (``WORKBENCH_FRONTEND``, default on)."""
    forced = _OVERRIDE.get()
    if forced is not None:
        return forced
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "off", "false", "no")


@contextlib.contextmanager
def frontend_gate(on: bool) -> Iterator[None]:
    """Turn the front-end gate on or off inside the block (whatever ``WORKBENCH_FRONTEND`` says).

    Off is for the interpreter's CPU-only features (a host call inside a kernel, in a test of the interpreter
    itself): code that runs with the gate off may not compile for a GPU.
    """
    token = _OVERRIDE.set(bool(on))
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def install(ti: Any) -> None:
    """Install the reference driver, the gate, warmup and the first-config autotuner (once; cpu mode)."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    _install_driver()
    _install_run(ti)
    _install_autotune()


# ---------------------------------------------------------------------------------------------------------- driver


class DeviceProperties(dict):
    """The reference GPU's properties, keyed as ``driver.active.utils.get_device_properties`` keys them on a GPU.

    ``"source"`` says where they come from. Figures the workbench's tables do not hold (clock rates, bus width)
    raise a KeyError saying so rather than inventing them.
    """

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"{key!r}: the workbench's tables of the reference GPU ({self.get('name')}) do not hold it; "
                       f"cpu mode knows {', '.join(sorted(k for k in self if k not in ('source', 'name')))}")


def reference_properties() -> DeviceProperties:
    """Return the reference GPU's device properties (H200: SMs from workbench.hardware, limits from the arch table)."""
    from workbench import hardware
    from workbench.cuda import arch

    spec, lim = hardware.DEVICES[REFERENCE_GPU], arch.get(_ARCH)
    return DeviceProperties(
        max_shared_mem=lim.max_smem_per_block, max_num_regs=lim.max_regs_per_block,
        multiprocessor_count=spec.sm_count, warpSize=lim.warp_size, max_threads_per_sm=lim.max_threads_per_sm,
        max_threads_per_block=lim.max_threads_per_block, name=spec.name,
        source=f"reference GPU {spec.name} ({_ARCH}) from workbench.hardware and workbench.cuda.arch, not this "
               "machine: cpu mode has no GPU, and the Triton interpreter runs the kernels")


_noted: set[str] = set()


def _note_once(what: str, msg: str, category: type[Warning]) -> None:
    if what not in _noted:
        _noted.add(what)
        warnings.warn(msg, category, stacklevel=_caller_level())


def _caller_level() -> int:
    """Return the warnings stack level of the first frame outside workbench and triton (the user's line)."""
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    skip = (here, os.path.dirname(os.path.abspath(sys.modules["triton"].__file__)))
    f, level = sys._getframe(2), 2  # level 1 is warnings.warn's caller, _note_once
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(skip):
        f, level = f.f_back, level + 1
    return level


class _ReferenceUtils:
    """``driver.active.utils`` in cpu mode: device properties of the reference GPU; nothing to load a cubin into."""

    def get_device_properties(self, device: int | None = 0) -> DeviceProperties:
        """Return the reference GPU's properties (any device index: cpu mode has one, the reference)."""
        _note_once("props", "cpu mode: triton device properties are the reference GPU's (NVIDIA H200 SXM, sm_90: "
                   "132 SMs, 227 KiB shared memory per block), not this machine's", ReferenceGpuNote)
        return reference_properties()

    def load_binary(self, *args: Any) -> Any:
        """Refuse: cpu mode has no GPU to load a cubin into (the interpreter runs kernels from their source)."""
        from workbench.registry import UnsupportedHere

        raise UnsupportedHere("cpu mode has no GPU to load a Triton cubin into: kernels run under the interpreter")


def _benchmark_refused(*args: Any, **kwargs: Any) -> Any:
    from workbench.registry import UnsupportedHere

    raise UnsupportedHere("cpu mode: timing a kernel under the Triton interpreter says nothing about a GPU, so "
                          "triton's benchmarker is not available here; use wb.bench for the workbench's timings")


def _driver_class() -> type:
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class ReferenceGpuDriver(DriverBase):
        """Triton's active driver in cpu mode: the reference GPU (H200, sm_90) as target, the CPU as torch device."""

        reference = True

        def __init__(self) -> None:
            super().__init__()
            self.utils = _ReferenceUtils()

        @classmethod
        def is_active(cls) -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            from triton.backends.nvidia.driver import ty_to_cpp

            return ty_to_cpp(ty)

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", _CC, 32)

        def get_active_torch_device(self) -> Any:
            import torch

            return torch.device("cpu")

        def get_device_interface(self) -> Any:
            import torch

            return torch.cpu

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            if int(device or 0) != 0:
                raise ValueError(f"cpu mode has one (reference) device, 0; got {device}")

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
            return divmod(_CC, 10)

        def get_benchmarker(self) -> Any:
            return _benchmark_refused

        def get_empty_cache_for_benchmark(self) -> Any:
            import torch

            return torch.empty(0, dtype=torch.int)

        def clear_cache(self, cache: Any) -> None:
            cache.zero_()

    return ReferenceGpuDriver


def _install_driver() -> None:
    from triton.runtime.driver import driver as cfg

    try:
        cfg.active  # noqa: B018  (a real GPU driver, if Triton finds one, stays)
        return
    except RuntimeError:
        pass
    d = _driver_class()()
    cfg._default = d
    cfg.set_active(d)


# ------------------------------------------------------------------------------------------------------------ gate


@dataclass
class _Verdict:
    """What the sm_90 compile said of one specialisation: ok, or Triton's message."""

    ok: bool
    message: str = ""
    kernel: Any = None  # the CompiledKernel (in memory only; a disk verdict has none)


@dataclass
class _KernelGate:
    """One interpreted kernel's binder (as a CUDA launch specialises) and its verdicts by specialisation."""

    binder: Any
    constexprs: frozenset[str]
    jit: Any  # the kernel's JITFunction (its source read once; its cache key cleared before each compile)
    verdicts: dict[tuple, _Verdict] = field(default_factory=dict)


def _target() -> Any:
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", _CC, 32)


_backend_cache: list[Any] = []


def _backend() -> Any:
    if not _backend_cache:
        from triton.compiler.compiler import make_backend

        _backend_cache.append(make_backend(_target()))
    return _backend_cache[0]


def _gate_of(ifn: Any) -> _KernelGate:
    g = getattr(ifn, "_wb_gate", None)
    if g is None:
        from triton.runtime.jit import JITFunction, create_function_from_signature

        jit = JITFunction(ifn.fn)
        g = _KernelGate(create_function_from_signature(jit.signature, jit.params, _backend()),
                        frozenset(p.name for p in jit.params if p.is_constexpr), jit)
        ifn._wb_gate = g
    return g


def _option_kwargs(kwargs: dict) -> dict:
    """Return the launch's keywords with the options a GPU launch adds (debug, instrumentation mode)."""
    from triton import knobs

    kw = dict(kwargs)
    kw["debug"] = kw.get("debug") or knobs.runtime.debug
    kw["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    return kw


def _deps(fn: Any) -> tuple:
    """Return (name, id) of every @jit helper and constexpr global the kernel reaches: a redefinition changes it."""
    from triton.language import constexpr
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    out, todo, seen = [], [fn], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        g = f.__globals__
        for name in f.__code__.co_names:
            v = g.get(name)
            if isinstance(v, (InterpretedFunction, JITFunction)):
                out.append((name, id(v)))
                todo.append(v.fn)
            elif isinstance(v, constexpr):
                out.append((name, id(v)))
    return tuple(out)


def check(ifn: Any, args: tuple, kwargs: dict, *, need_kernel: bool = False) -> _Verdict | None:
    """Compile this launch of ``ifn`` for sm_90 (once per specialisation); raise CompileError if Triton refuses it.

    Returns None when the gate is off (and no kernel is needed), else the verdict; ``need_kernel`` (warmup) makes
    sure the verdict holds the CompiledKernel.
    """
    if not (need_kernel or enabled()):
        return None
    g = _gate_of(ifn)
    kw = _option_kwargs(kwargs)
    try:
        _, spec, opts = g.binder(*args, **kw)
    except TypeError as e:  # a missing or unexpected argument: a TypeError on a GPU too, naming the kernel
        raise TypeError(f"Triton kernel {str(e).replace('dynamic_func()', ifn.__name__ + '()')}") from None
    except Exception as e:  # an argument type a GPU launch cannot specialise on
        raise _refusal(ifn, f"{type(e).__name__}: {e}") from None
    key = (_deps(ifn.fn), str(_general(spec)), str(opts))
    v = g.verdicts.get(key)
    if v is None or (need_kernel and v.ok and v.kernel is None):
        v = g.verdicts[key] = _decide(ifn, g, args, kw, need_kernel)
    if not v.ok:
        raise _refusal(ifn, v.message)
    return v


def _general(spec: Any) -> list:
    """Return the launch's specialisation without the divisible-by-16 hints of its integer arguments.

    A GPU compiles n = 16 and n = 17 apart (the hint lets it vectorise), but what it refuses does not depend on the
    hint, and the kernel compiled without it is valid for both: one front-end compile serves every size, where each
    new tail size cost a compile of its own (seconds for an attention kernel). An integer equal to 1 stays apart
    (Triton makes it a constexpr), and so do pointer alignments and every constexpr.
    """
    return [(ty, "") if isinstance(ty, str) and ty[:1] in "iu" and hint == "D" else (ty, hint)
            for ty, hint in spec]


def _refusal(ifn: Any, message: str) -> CompileError:
    name = getattr(ifn, "__name__", "kernel")
    return CompileError(
        f"Triton kernel {name}: Triton's {_ARCH} compile (the GPU compiler, run before the interpreter) refuses "
        f"this launch, so a GPU would too:\n{message}\n(The interpreter alone would have run it. {ENV_VAR}=0 skips "
        "this check for CPU-only interpreter features.)", message)


def _decide(ifn: Any, g: _KernelGate, args: tuple, kw: dict, need_kernel: bool) -> _Verdict:
    """Compile the launch for sm_90 (or read its verdict from disk) and return the verdict."""
    from triton.compiler import ASTSource
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from workbench.inspection import _jit_of, _jit_stdlib

    jit = g.jit
    jit.hash = None  # its cache key is computed again: it sees the helpers as they are now
    # A @jit function passed as an argument (a constexpr `ACTIVATION: tl.constexpr`) is an InterpretedFunction
    # here: the compile takes the JITFunction of the same Python function, and the helpers it calls in turn.
    passed = [a for a in (*args, *kw.values()) if isinstance(a, InterpretedFunction)]
    args = tuple(_jit_of(a, JITFunction) if isinstance(a, InterpretedFunction) else a for a in args)
    kw = {k: _jit_of(a, JITFunction) if isinstance(a, InterpretedFunction) else a for k, a in kw.items()}
    with _jit_stdlib(ifn.fn, extra=[f.fn for f in passed]):
        try:
            bound, spec, opts = g.binder(*args, **kw)
            options, sig, constexprs, attrs = jit._pack_args(_backend(), kw, bound, _general(spec), opts)
            src = ASTSource(jit, sig, constexprs, attrs)
            entry = _entry(src, options, need_kernel)
        except Exception as e:  # the key needs the source's dependencies, and Triton refuses some of them here
            return _Verdict(False, _message(e))
        if not need_kernel:
            hit = _read(entry)
            if hit is not None:
                return hit
        v = _compile(src, options, full=need_kernel)
    _write(entry, v)
    return v


def _entry(src: Any, options: Any, full: bool) -> Any:
    """Return the disk-cache file of one specialisation's verdict (Triton's own compile-cache key, hashed)."""
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.runtime.cache import get_cache_key

    from workbench.cuda.toolchain import cache_dir

    key = get_cache_key(src, _backend(), options, get_cache_invalidating_env_vars()) + ("-full" if full else "-front")
    return cache_dir("triton-gate") / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _read(entry: Any) -> _Verdict | None:
    try:
        hit = json.loads(entry.read_text())
        return _Verdict(bool(hit["ok"]), str(hit.get("message", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or corrupt: compile again


def _write(entry: Any, v: _Verdict) -> None:
    try:
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"ok": v.ok, "message": v.message}))
        os.replace(tmp, entry)  # atomic: parallel processes never read half a file
    except OSError:
        pass


def _message(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if type(e).__name__ in ("CompilationError", "OutOfResources") else f"{type(e).__name__}: {text}"


def _compile(src: Any, options: Any, full: bool) -> _Verdict:
    """Compile ``src`` for sm_90, then check what a GPU checks as it loads a kernel (shared memory, threads).

    ``full``: Triton's whole compile down to the cubin (``triton.compile``, kept in the verdict). Otherwise the
    front end only: TTIR, TTGIR and the shared-memory allocation pass of the LLVM lowering. That is where Triton
    refuses what a GPU refuses (shapes, types, Python calls, constexpr rules, layouts, shared memory) at a few
    hundredths of the whole compile's cost: the LLVM and ptxas stages of a big tile take seconds.
    """
    import triton

    try:
        if full:
            k = triton.compile(src, target=_target(), options=options.__dict__)
            shared, warps = int(k.metadata.shared), int(k.metadata.num_warps)
        else:
            k = None
            shared, warps = _front_end(src, options)
    except Exception as e:
        return _Verdict(False, _message(e))
    refused = _over_limits(shared, warps)
    return _Verdict(False, refused) if refused else _Verdict(True, kernel=k)


def _front_end(src: Any, options: Any) -> tuple[int, int]:
    """Run Triton's sm_90 pipeline up to shared-memory allocation; return (shared bytes, warps)."""
    from triton._C.libtriton import ir, nvidia, passes
    from triton.backends.nvidia.compiler import get_ptx_version_from_options

    backend = _backend()
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(_target(), options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    metadata = {"hash": "wb-front-end", "target": _target(), **options.__dict__}
    for ext in ("ttir", "ttgir"):
        module = stages[ext](module, metadata)
    pm = ir.pass_manager(module.context)  # make_llir's passes up to and including the shared-memory allocation
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm)
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, _CC, get_ptx_version_from_options(options, _CC))
    pm.run(module, "wb_front_end")
    warps = module.get_int_attr("ttg.total-num-warps") or options.num_warps
    return int(module.get_int_attr("ttg.shared") or 0), int(warps)


def _over_limits(shared: int, warps: int) -> str:
    """Return Triton's out-of-resources message when an H200 block cannot hold the kernel, else ''."""
    from triton.runtime.errors import OutOfResources

    from workbench.cuda import arch

    lim = arch.get(_ARCH)
    if shared > lim.max_smem_per_block:
        return _message(OutOfResources(shared, lim.max_smem_per_block, "shared memory"))
    if warps * 32 > lim.max_threads_per_block:
        return _message(OutOfResources(warps * 32, lim.max_threads_per_block, "threads"))
    return ""


# ---------------------------------------------------------------------------------------------------------- warmup


class WarmedKernel:
    """What ``kernel.warmup(...)`` returns in cpu mode: the sm_90 compile of one specialisation, launchable.

    ``metadata``, ``asm``, ``name`` and ``hash`` are Triton's CompiledKernel's; ``n_regs``, ``n_spills``
    (local memory words, as the CUDA driver counts them) and ``n_max_threads`` come from ptxas on its PTX.
    ``kernel[grid](*args)`` runs it under the interpreter with the warmed constexprs and options.
    """

    def __init__(self, ifn: Any, compiled: Any, bound: dict, options: dict) -> None:
        from workbench.inspection import _maxntid, parse_ptxas, ptxas_log

        self.fn, self.compiled, self._bound, self._options = ifn, compiled, bound, options
        self.metadata, self.asm, self.name, self.hash = compiled.metadata, compiled.asm, compiled.name, compiled.hash
        self.src = compiled.src
        res = parse_ptxas(ptxas_log(compiled.asm["ptx"]))
        r = res.get(self.name) or next(iter(res.values()), {"registers": 0, "stack": 0})
        self.n_regs = int(r["registers"])
        self.n_spills = int(r["stack"]) // 4
        self.n_max_threads = _maxntid(compiled.asm["ptx"], self.name) or 1024
        self.module = self.function = None

    def _init_handles(self) -> None:
        """Do nothing: there is no GPU to load into (the resource checks ran when it was compiled)."""

    def __getitem__(self, grid: Any) -> Any:
        def runner(*args: Any, stream: Any = None) -> None:
            self.fn.run(*self._args(args), grid=grid, warmup=False, **self._options)

        return runner

    def _args(self, args: tuple) -> list:
        """Return the launch's arguments with the warmed constexprs (which a compiled kernel cannot change)."""
        from triton.runtime.jit import MockTensor

        names, constexprs = list(self._bound), _gate_of(self.fn).constexprs
        if len(args) > len(names):
            raise TypeError(f"{self.name}: {len(args)} arguments for {len(names)} parameters")
        out = list(args)
        for i, name in enumerate(names):
            warmed = self._bound[name]
            if name not in constexprs:
                if i >= len(out):
                    raise TypeError(f"{self.name}: missing argument {name!r}")
                continue
            if i < len(out) and out[i] != warmed and not isinstance(warmed, MockTensor):
                raise ValueError(f"{self.name}: {name}={out[i]!r} but the kernel was compiled (warmed up) with "
                                 f"{name}={warmed!r}; warm up again for another value")
            if i >= len(out):
                out.append(warmed)
        return out

    def __repr__(self) -> str:
        return (f"WarmedKernel({self.name}, {_ARCH}: {self.n_regs} registers, {self.metadata.shared} B shared, "
                f"{self.metadata.num_warps} warps)")


def warmup(ifn: Any, args: tuple, kwargs: dict) -> WarmedKernel:
    """Compile ``ifn`` for sm_90 as a launch with ``args``/``kwargs`` would, and return it (raise if refused)."""
    v = check(ifn, args, kwargs, need_kernel=True)
    bound, _, _ = _gate_of(ifn).binder(*args, **_option_kwargs(kwargs))
    options = {k: kwargs[k] for k in kwargs if k not in bound}
    return WarmedKernel(ifn, v.kernel, bound, options)


def _install_run(ti: Any) -> None:
    run = ti.InterpretedFunction.run

    def gated_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup:
            return globals()["warmup"](self, args, kwargs)
        check(self, args, kwargs)
        return run(self, *args, grid=grid, warmup=False, **kwargs)

    gated_run.__doc__ = "Compile the launch for sm_90 first (the front-end gate), then run it under the interpreter."
    ti.InterpretedFunction.run = gated_run


# -------------------------------------------------------------------------------------------------------- autotune


@dataclass
class _Round:
    """One tuning round of an autotuner (one new key): the config that ran first, and those refused."""

    picked: Any = None
    refused: list[tuple[Any, str]] = field(default_factory=list)


def _run_once(kernel_call: Any, quantiles: Any = None, **kw: Any) -> list[float]:
    kernel_call()
    return [0.0, 0.0, 0.0]


def _install_autotune() -> None:
    from triton.runtime.autotuner import Autotuner

    prune, bench = Autotuner.prune_configs, Autotuner._bench

    def prune_configs(self: Any, kwargs: dict) -> list:
        self._wb_round = _Round()  # a tuning round (or a warmup) starts with pruning
        return prune(self, kwargs)

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        rnd = getattr(self, "_wb_round", None) or _Round()
        if rnd.picked is not None:
            return [math.inf] * 3  # not run: the first config that ran is the pick
        self.__dict__["do_bench"] = _run_once  # one run, no timing (overrides the cached_property)
        try:
            t = bench(self, *args, config=config, **meta)  # Triton's: resource errors give inf
        except CompileError as e:  # the front-end gate refused this config
            rnd.refused.append((config, str(e.log or e)))
            return [math.inf] * 3
        if t[0] != math.inf:
            rnd.picked = config
            _note_pick(self, config, rnd)
        return t

    prune_configs.__doc__ = "Prune as Triton does, starting a new first-config-that-runs round."
    _bench.__doc__ = "Run the config once (cpu mode: no timing) unless an earlier config already ran."
    Autotuner.prune_configs, Autotuner._bench = prune_configs, _bench


def _note_pick(tuner: Any, config: Any, rnd: _Round) -> None:
    name = getattr(tuner.base_fn, "__name__", "kernel")
    tuner.cpu_mode_note = (f"cpu mode: autotune picked the first config that runs ({config}); emulated time does "
                           "not rank configs, so a GPU may pick another")
    skipped = f" ({len(rnd.refused)} earlier config(s) refused by the sm_90 compile)" if rnd.refused else ""
    _note_once(f"autotune:{id(tuner)}", f"{name}: {tuner.cpu_mode_note}{skipped}.", CpuAutotuneNote)
