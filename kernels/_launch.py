"""Launch plumbing every variant shares: compiled CUDA C kernels, dtype suffixes, Triton tuning, alignment, limits.

A variant file says *what* it launches; this module says *how*, once for all of them:

* :func:`cuda_kernel` returns a kernel of a ``.cu`` file, compiled once per process and cached by (file, kernel,
  dtype, arch): on a GPU cupy/NVRTC builds the file (``gpu_options`` such as :func:`only_dtype` narrow the build to
  the instances the launch needs), in cpu mode the CPU engine builds the whole file once and every kernel of it
  comes from that one module. ``arch="sm_90a"`` kernels (wgmma, setmaxnreg) are built with nvcc instead.
* :data:`SUFFIX` names each dtype's extern "C" instance (``<base>_f32/_f16/_bf16``); :func:`only_dtype` is the
  ``-DWB_ONLY_DT`` option of ``kernels/include/kernel_helpers.cuh`` that compiles just one of them.
* :func:`tuned` wraps a Triton kernel: autotuned over the GPU configs on a GPU (split by dtype and pruned by what
  fits), one fixed config under the interpreter, whose times say nothing about a GPU.
* :func:`triton_spec` is a Triton kernel's ``wb.inspect`` spec, its signature derived from the kernel's parameters
  (``*_ptr`` pointers, ints, ``tl.constexpr``) and the launch's constexprs, warps and stages.
* :func:`is_aligned`, :func:`pow2_threads`, :func:`per_16_bytes` and :func:`smem_per_block` (the opt-in shared
  memory per block, from the arch table in ``workbench/cuda/arch.py``) are the small facts launchers share.

It lives in ``kernels/``, beside the variants it serves, not in ``workbench/``: it is how this project's kernels
are launched, not part of the learner-facing ``wb.*`` API, and it depends on nothing but ``workbench`` and Triton.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from workbench import MODE

if TYPE_CHECKING:
    import triton

SUFFIX: dict[torch.dtype, str] = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_DT_CODE = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}  # kernel_helpers.cuh's WB_ONLY_DT values

_modules: dict[tuple[str, tuple[str, ...]], Any] = {}
_kernels: dict[tuple[str, str, str | None, tuple[str, ...]], Any] = {}


def kernel_name(base: str, dtype: torch.dtype | None = None) -> str:
    """Return the extern "C" name of ``base``'s instance for ``dtype`` (``softmax_vec_f16``), or ``base``."""
    return base if dtype is None else f"{base}_{SUFFIX[dtype]}"


def only_dtype(dtype: torch.dtype) -> tuple[str, ...]:
    """Return the option that compiles only ``dtype``'s instances of a file using ``WB_EACH_DTYPE``."""
    return (f"-DWB_ONLY_DT={_DT_CODE[dtype]}",)


def cuda_kernel(cu: str | Path, base: str, dtype: torch.dtype | None = None, *, gpu_options: Sequence[str] = (),
                arch: str | None = None) -> Any:
    """Return the compiled kernel ``<base>_<dtype suffix>`` (or ``base``) of the CUDA C file ``cu``.

    Call it as cupy's kernels are called: ``k(grid, block, args, shared_mem=0)``. Compiled once per process per
    (file, kernel, dtype, arch); ``gpu_options`` only narrow what NVRTC compiles on a GPU (the CPU engine builds
    the whole file once, whatever is asked for first). ``arch="sm_90a"`` builds the kernel with nvcc for that target.
    """
    name = kernel_name(base, dtype)
    opts = tuple(gpu_options)
    key = (str(cu), name, arch, opts)
    if key not in _kernels:
        _kernels[key] = _compile(Path(cu), name, opts, arch)
    return _kernels[key]


def _compile(cu: Path, name: str, gpu_options: tuple[str, ...], arch: str | None) -> Any:
    from workbench import cuda

    if arch is not None:  # wgmma/setmaxnreg exist only for sm_90a: nvcc builds the cubin, cupy loads it
        return cuda.RawKernel(cu, name, options=gpu_options, arch=arch)
    opts = gpu_options if MODE == "gpu" else ()
    mkey = (str(cu), opts)
    if mkey not in _modules:
        _modules[mkey] = cuda.RawModule(cu, options=opts)
    return _modules[mkey].get_function(name)


def cuda_spec(cu: str | Path, base: str, dtype: torch.dtype | None = torch.float32, options: Sequence[str] = (),
              **extra: Any) -> dict:
    """Return the ``wb.inspect`` spec of one kernel of ``cu`` (by default its fp32 instance)."""
    return {"kind": "cuda", "code": Path(cu), "name": kernel_name(base, dtype), "options": tuple(options), **extra}


# ------------------------------------------------------------------------------------------------------ Triton
def tuned(kernel: Any, configs: Sequence[triton.Config], *, cpu_config: triton.Config, key: Sequence[str],
          fp32_configs: Sequence[triton.Config] = (), dtype_arg: str | None = None,
          prune: Callable[..., list] | None = None, mode: str | None = None, **autotune_kw: Any) -> Any:
    """Return ``kernel`` autotuned over ``configs`` on a GPU, or run with ``cpu_config`` alone in cpu mode.

    Launch the result as ``t[grid](*args, **kw)`` with ``grid`` a function of the config's meta-parameters. Under the
    interpreter one config means no benchmarking: its times would say nothing about a GPU. ``fp32_configs`` are the
    candidates for fp32 inputs (FMA dots need smaller tiles than tensor-core ones): on a GPU the candidates are
    split by the element size of the argument ``dtype_arg``. ``prune(candidates, named_args, **kw)`` then keeps
    those that fit (shared memory, registers) and returns at least one. Other keywords go to ``triton.autotune``
    (``reset_to_zero``, ...). ``mode`` overrides ``workbench.MODE`` (tests build the GPU tuner in cpu mode).
    """
    import triton

    if (mode or MODE) != "gpu":
        return triton.autotune([cpu_config], key=list(key))(kernel)
    early = _by_dtype(fp32_configs, dtype_arg, prune) if fp32_configs else prune
    if fp32_configs and dtype_arg is None:
        raise ValueError("tuned: fp32_configs need dtype_arg, the argument whose element size picks them")
    return triton.autotune(list(configs) + list(fp32_configs), key=list(key),
                           prune_configs_by={"early_config_prune": early} if early else None, **autotune_kw)(kernel)


def _by_dtype(fp32_configs: Sequence[triton.Config], dtype_arg: str | None,
              prune: Callable[..., list] | None) -> Callable[..., list]:
    """Return an early_config_prune keeping the candidates of the launch's dtype, then ``prune``'s choice."""
    fp32_ids = {id(c) for c in fp32_configs}

    def early(configs: list, named_args: dict, **kw: Any) -> list:
        fp32 = named_args[dtype_arg].element_size() == 4
        pool = [c for c in configs if (id(c) in fp32_ids) == fp32]
        return prune(pool, named_args, **kw) if prune is not None else pool

    return early


def triton_spec(kernel: Any, dtype: torch.dtype | str = torch.float32, *, types: Mapping[str, Any] | None = None,
                num_warps: int = 4, num_stages: int = 3, divisible_ints: Sequence[str] | None = None,
                **constexprs: Any) -> dict:
    """Return the ``wb.inspect`` spec of a launch of ``kernel`` with these constexprs, its signature derived.

    The signature follows the kernel's parameters as a launch passes them: a ``tl.constexpr`` parameter takes its
    value from ``constexprs`` (the launch's keywords; one left out must have a default), a parameter named
    ``*_ptr`` is a pointer to ``dtype`` elements (a tensor), any other an ``i32`` (a Python int). ``types`` names
    the exceptions: an element type (a torch dtype or Triton's name, ``"fp8e4nv"``) for a pointer to other
    elements, ``float`` for an fp32 scalar. ``divisible_ints`` names the only integers a launch passes as multiples
    of 16, beside every pointer (``wb.inspect``'s default marks every integer). A name the kernel does not have, or
    a constexpr left without a value, raises TypeError.
    """
    from triton.runtime.jit import JITFunction

    params = (kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)).params  # interpreter: .fn
    types = dict(types or {})
    scalars = {p.name for p in params if not p.is_constexpr}
    const = {p.name for p in params if p.is_constexpr}
    problems = []
    if set(types) - scalars:
        problems.append(f"types names {sorted(set(types) - scalars)}, not among its arguments {sorted(scalars)}")
    if set(constexprs) - const:
        problems.append(f"{sorted(set(constexprs) - const)} are not among its tl.constexpr parameters {sorted(const)}")
    ints = {p.name for p in params if not p.is_constexpr and not p.name.endswith("_ptr")}
    if set(divisible_ints or ()) - ints:
        problems.append(f"divisible_ints names {sorted(set(divisible_ints or ()) - ints)}, not among its integers")
    unset = [p.name for p in params if p.is_constexpr and p.name not in constexprs and not p.has_default]
    if unset:
        problems.append(f"the tl.constexpr parameters {unset} need a value")
    if problems:
        raise TypeError(f"triton_spec({kernel.fn.__name__}): " + "; ".join(problems))
    sig = {}
    for p in params:
        if p.is_constexpr:
            sig[p.name] = "constexpr"
        elif p.name.endswith("_ptr"):
            sig[p.name] = "*" + _triton_type(types.get(p.name, dtype))
        else:
            sig[p.name] = _triton_type(types.get(p.name, int))
    spec = {"kind": "triton", "fn": kernel, "signature": sig, "constexprs": constexprs, "num_warps": num_warps,
            "num_stages": num_stages}
    if divisible_ints is not None:
        spec["divisible_by_16"] = [k for k, v in sig.items() if v.startswith("*")] + list(divisible_ints)
    return spec


def _triton_type(t: Any) -> str:
    """Return Triton's name of an element type: a torch dtype, a Triton or torch name, int (i32) or float (fp32)."""
    from triton.runtime.jit import type_canonicalisation_dict

    if isinstance(t, torch.dtype):
        t = str(t).removeprefix("torch.")
    t = {int: "i32", float: "fp32"}.get(t, t)
    if t not in type_canonicalisation_dict:
        raise TypeError(f"triton_spec: {t!r} is no Triton element type (a torch dtype, 'fp16', 'fp8e4nv', int, float)")
    return type_canonicalisation_dict[t]


_LEARNER_BUILT: dict[tuple[str, str], Any] = {}  # (source text, kernel name) -> its compiled RawKernel


def learner_raw_kernel(caller: str, source: Any, name: str, expected: str) -> Any:
    """Return the RawKernel ``name`` compiled from an exercise's CUDA source (cached per source text).

    ``source`` is the learner's ``__device__`` helpers followed by the given kernel's text; anything else is a
    TypeError naming ``caller`` and ``expected`` (what the source should hold).
    """
    if not isinstance(source, str) or name not in source:
        raise TypeError(f"{caller}: expected the exercise's CUDA source text, {expected}, which defines {name}")
    kernel = _LEARNER_BUILT.get((source, name))
    if kernel is None:
        import workbench as wb

        kernel = _LEARNER_BUILT[(source, name)] = wb.cuda.RawKernel(source, name)
    return kernel


def dot_precision(dtype: torch.dtype) -> str:
    """Return ``tl.dot``'s ``input_precision`` for inputs of ``dtype``: a true fp32 dot ("ieee") for fp32.

    The GPU default for fp32 would be TF32 (10-bit mantissa); for 16-bit inputs the setting is ignored.
    """
    return "ieee" if dtype == torch.float32 else "tf32"


# ------------------------------------------------------------------------------------------------------- facts
def is_aligned(*ts: torch.Tensor, nbytes: int = 16) -> bool:
    """Return True when every tensor's data starts on an ``nbytes`` boundary (vector loads, TMA, cp.async)."""
    return all(t.data_ptr() % nbytes == 0 for t in ts)


def per_16_bytes(dtype: torch.dtype) -> int:
    """Return how many elements of ``dtype`` one 16-byte vector load moves (4 fp32, 8 fp16/bf16)."""
    return 16 // torch.empty((), dtype=dtype).element_size()


def pow2_threads(work: int, lo: int = 32, hi: int = 1024) -> int:
    """Return the power of two in [lo, hi] closest above ``work`` (threads for ``work`` items per row)."""
    t = lo
    while t < work and t < hi:
        t *= 2
    return t


@functools.cache
def smem_per_block() -> int:
    """Return the opt-in shared memory per block in bytes: this GPU's, in cpu mode Hopper's (the tuned-for target).

    From the arch table (``workbench/cuda/arch.py``); a GPU newer than the table reports its own limit.
    """
    from workbench.cuda import arch

    if MODE != "gpu":
        return arch.get("sm_90").max_smem_per_block
    major, minor = torch.cuda.get_device_capability()
    try:
        return arch.get(f"sm_{major}{minor}").max_smem_per_block
    except ValueError:  # an architecture the table does not list yet
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin)
