"""Exceptions raised by ``workbench.cuda`` and ``workbench.inspect``."""

from __future__ import annotations


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


class GpuOnlyError(KernelLaunchError):
    """The kernel uses a feature (inline PTX) that only a real GPU can run."""


class MemcheckError(KernelLaunchError):
    """A checked launch found invalid global-memory accesses; ``records`` lists them (dicts)."""

    def __init__(self, message: str, records: list[dict], total: int) -> None:
        super().__init__(message)
        self.records = records
        self.total = total
