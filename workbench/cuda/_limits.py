"""Launch limits of the CPU engine: the target GPU's shared-memory limits, a per-launch time limit, a size guard.

* Shared memory follows the target architecture (``-arch=sm_XX`` in the kernel's options, else
  ``$WORKBENCH_CUDA_ARCH``, else sm_90) from :mod:`workbench.cuda.arch`: at most 48 KB of static shared memory
  per kernel (ptxas refuses more), dynamic shared memory up to 48 KB minus the static part unless the kernel
  opted in with ``max_dynamic_shared_size_bytes``, and the opt-in itself at most the per-block maximum minus the
  static part (as ``cudaFuncSetAttribute`` checks).
* The time limit stops a launch that runs longer (:class:`LaunchTimeoutError`); the size guard refuses, after a
  fraction of a second, a launch whose estimated run time (from the blocks done so far) is over it
  (:class:`LaunchTooLargeError`). Both are per launch, in seconds, and can be changed or turned off.
"""

from __future__ import annotations

import os
import re

from workbench.cuda import arch
from workbench.cuda.errors import LaunchConfigError

DEFAULT_ARCH = "sm_90"
DEFAULT_TIME_LIMIT = 300.0
DEFAULT_SIZE_GUARD = 60.0
#: Each launch limit: the environment variable that sets it, and its default in seconds.
_LIMITS: dict[str, tuple[str, float]] = {
    "time_limit": ("WORKBENCH_CUDA_TIME_LIMIT", DEFAULT_TIME_LIMIT),
    "size_guard": ("WORKBENCH_CUDA_SIZE_GUARD", DEFAULT_SIZE_GUARD),
}
_chosen: dict[str, float | None] = {}  # what set_time_limit/set_size_guard chose in this process


def _seconds(value: float | int | str | None, what: str) -> float | None:
    """Return ``value`` as seconds (None: no limit); raise ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("", "none", "off", "0", "inf", "no", "false"):
            return None
        try:
            value = float(v)
        except ValueError:
            raise ValueError(f"{what}: expected a number of seconds or 'none', got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a number of seconds or None, got {value!r}")
    if value != value or value < 0:
        raise ValueError(f"{what}: expected a number of seconds >= 0 or None, got {value!r}")
    return None if value == 0 or value == float("inf") else float(value)


def _limit(what: str) -> float | None:
    """Return the limit ``what`` in seconds: as set in this process, else from its environment variable, else the
    default (None: off)."""
    if what in _chosen:
        return _chosen[what]
    env, default = _LIMITS[what]
    value = os.environ.get(env)
    return default if value is None else _seconds(value, env)


def set_time_limit(seconds: float | None) -> None:
    """Stop any CPU-engine launch that runs longer than ``seconds`` (None or 0: no limit).

    The default is 300 s, or ``$WORKBENCH_CUDA_TIME_LIMIT`` (seconds, or ``none``). A stopped launch raises
    LaunchTimeoutError; the module stays usable.
    """
    _chosen["time_limit"] = _seconds(seconds, "set_time_limit")


def time_limit() -> float | None:
    """Return the per-launch time limit in seconds (None: no limit)."""
    return _limit("time_limit")


def set_size_guard(seconds: float | None) -> None:
    """Refuse CPU-engine launches whose estimated run time is over ``seconds`` (None or 0: never refuse).

    The default is 60 s, or ``$WORKBENCH_CUDA_SIZE_GUARD`` (seconds, or ``none``). The estimate comes from the
    blocks finished in the first fraction of a second; a refused launch raises LaunchTooLargeError.
    """
    _chosen["size_guard"] = _seconds(seconds, "set_size_guard")


def size_guard() -> float | None:
    """Return the size guard in seconds (None: off)."""
    return _limit("size_guard")


_ARCH_OPT = re.compile(r"^(?:-arch|--gpu-architecture|-gencode)[= ]?(?:arch=)?(?P<a>(?:sm|compute)_\d+a?)")


def target_arch(options: tuple[str, ...] | list[str] = ()) -> arch.ArchLimits:
    """Return the limits of the architecture a kernel is built for (its -arch option, $WORKBENCH_CUDA_ARCH, sm_90)."""
    opts = list(options)
    for i, o in enumerate(opts):
        if not isinstance(o, str):
            continue
        if o in ("-arch", "--gpu-architecture") and i + 1 < len(opts):
            o = f"{o}={opts[i + 1]}"
        m = _ARCH_OPT.match(o)
        if m:
            try:
                return arch.get(m.group("a"))
            except ValueError:
                break  # an arch the table does not know: fall back to the default
    return arch.get(os.environ.get("WORKBENCH_CUDA_ARCH") or DEFAULT_ARCH)


def _kb(n: int) -> str:
    return f"{n} B ({n / 1024:g} KB)"


def check_static_smem(kernel: str, static: int, limits: arch.ArchLimits) -> str | None:
    """Return ptxas's complaint if ``kernel`` declares more static shared memory than ``limits`` allow."""
    cap = limits.default_smem_per_block
    if static <= cap:
        return None
    return (f"ptxas error: entry function '{kernel}' uses too much shared data ({static:#x} bytes, {cap:#x} max): "
            f"{_kb(static)} of static __shared__ arrays, but {limits.name} allows at most {_kb(cap)} per kernel. "
            "Use dynamic shared memory (extern __shared__ T s[]; plus shared_mem= at launch) and opt in with "
            f"kernel.max_dynamic_shared_size_bytes = N, up to {_kb(limits.max_smem_per_block)} per block on "
            f"{limits.name}.")


def check_dynamic_smem(kernel: str, shared_mem: int, static: int, optin: int, limits: arch.ArchLimits) -> None:
    """Raise LaunchConfigError if a launch with ``shared_mem`` dynamic bytes would be refused on ``limits``."""
    maxb = limits.max_smem_per_block
    if optin < 0:
        raise LaunchConfigError(f"kernel {kernel!r}: max_dynamic_shared_size_bytes must be >= 0, got {optin}")
    if optin > maxb - static:
        raise LaunchConfigError(
            f"kernel {kernel!r}: max_dynamic_shared_size_bytes = {optin} is more than {limits.name} allows: at "
            f"most {_kb(maxb)} of shared memory per block, minus the kernel's {static} B of static shared memory, "
            f"leaves {maxb - static} B (cudaFuncSetAttribute would fail with cudaErrorInvalidValue)")
    default = limits.default_smem_per_block - static
    limit = optin if optin else default
    if shared_mem <= limit:
        return
    if shared_mem + static > maxb:
        raise LaunchConfigError(
            f"kernel {kernel!r}: shared_mem={shared_mem} bytes of dynamic shared memory plus {static} B static is "
            f"more than the {_kb(maxb)} a block may use on {limits.name} (the launch fails with "
            "cudaErrorInvalidValue / 'too many resources requested for launch')")
    raise LaunchConfigError(
        f"kernel {kernel!r}: shared_mem={shared_mem} bytes exceeds the {limit} B of dynamic shared memory this "
        f"kernel may use ({'its opt-in' if optin else f'the 48 KiB default limit minus {static} B static'}); on a "
        "GPU you must first raise it with kernel.max_dynamic_shared_size_bytes = N "
        f"(cudaFuncAttributeMaxDynamicSharedMemorySize), up to {_kb(maxb - static)} on {limits.name}")
