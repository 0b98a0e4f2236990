"""Exceptions raised by ``workbench.cuda`` and ``workbench.inspect``."""

from __future__ import annotations

__all__ = ["CompileError", "CudaError", "FrontendError", "GpuOnlyError", "KernelArgumentError", "KernelLaunchError",
           "LaunchConfigError", "LaunchTimeoutError", "LaunchTooLargeError", "MemcheckError", "RaceError",
           "ReadOnlyArgumentError", "SanitizerError", "SynccheckError", "ToolchainNotFoundError", "UninitializedError"]


class CudaError(RuntimeError):
    """Base class of the workbench's CUDA errors."""


class ToolchainNotFoundError(CudaError):
    """A compiler or CUDA tool the workbench needs is not installed (the message says what to install)."""


class CompileError(CudaError):
    """The kernel source did not compile; ``log`` holds the compiler diagnostics (with the user's path:line)."""

    def __init__(self, message: str, log: str = "", path: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.path = path


class KernelArgumentError(CudaError, TypeError):
    """The arguments of a kernel call do not match the kernel's parameters."""


class LaunchConfigError(CudaError, ValueError):
    """The grid, block or shared-memory size of a launch is invalid (as the CUDA driver would reject it)."""


class KernelLaunchError(CudaError):
    """The kernel failed while running (device-side assert, trap, barrier deadlock, ...)."""


class ReadOnlyArgumentError(KernelArgumentError, KernelLaunchError):
    """The kernel wrote into an array that is not writeable (numpy ``writeable=False``), through the parameter named.

    The CPU engine maps such an array's copy read-only, so the write faults where it happens (a kernel that only
    reads a non-const parameter is fine); ``param`` names the parameter.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class GpuOnlyError(KernelLaunchError):
    """The kernel uses a feature (inline PTX) that only a real GPU can run."""


class LaunchTimeoutError(KernelLaunchError):
    """A CPU-engine launch ran past its time limit (``workbench.cuda.set_time_limit``) and was stopped."""


class LaunchTooLargeError(LaunchConfigError):
    """A CPU-engine launch was refused up front: its estimated run time is far over the size guard."""


class SanitizerError(KernelLaunchError):
    """A checked launch found a bug, as compute-sanitizer's ``tool`` would; ``records`` lists them (dicts)."""

    tool = "sanitizer"

    def __init__(self, message: str, records: list[dict], total: int) -> None:
        super().__init__(message)
        self.records = records
        self.total = total


class MemcheckError(SanitizerError):
    """A checked launch found out-of-bounds or misaligned accesses (global or shared memory)."""

    tool = "memcheck"


class RaceError(SanitizerError):
    """A checked launch found a data race (shared memory between two barriers, or global memory in one launch)."""

    tool = "racecheck"


class UninitializedError(SanitizerError):
    """A checked launch read memory that was never written (shared memory, as compute-sanitizer's initcheck)."""

    tool = "initcheck"


class SynccheckError(SanitizerError):
    """A checked launch misused a barrier or warp collective, as compute-sanitizer's synccheck reports it.

    A ``__syncthreads()`` that only part of the block reached (the others exited), a ``*_sync`` collective whose
    mask names lanes that exited or called a different collective, or a barrier no thread can get past.
    """

    tool = "synccheck"


class FrontendError(CompileError):
    """The GPU compiler (NVRTC for sm_90, as cupy uses it) refuses the source, so the CPU engine does not run it.

    ``log`` holds NVRTC's own diagnostics (empty when the source compiles but the kernel name would not be found).
    """
