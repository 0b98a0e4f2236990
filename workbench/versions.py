"""Collect the versions and device facts every benchmark record and `doctor` report carries."""

from __future__ import annotations

import functools
import importlib.metadata as md
import platform
import re
import subprocess
from typing import Any

from workbench._mode import MODE


def _dist(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _cupy_version() -> str | None:
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        v = _dist(name)
        if v:
            return f"{v} ({name})"
    return None


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str | None:
    """Return nvcc's release string ('13.0, V13.0.88'), or None when there is no nvcc (where inspect looks)."""
    from workbench.cuda.errors import ToolchainNotFoundError
    from workbench.cuda.toolchain import find_cuda_tool

    try:
        exe = find_cuda_tool("nvcc")
    except ToolchainNotFoundError:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release ([^\n]+)", out)
    return m.group(1).strip() if m else out.strip().splitlines()[-1]


def nvrtc_version() -> str | None:
    """Return the NVRTC version cupy compiles CUDA C with (gpu mode), else the one cuda-bindings finds; or None."""
    if MODE == "gpu":
        try:
            import cupy

            return ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
        except Exception:  # noqa: BLE001  (no cupy, or no NVRTC library for it)
            pass
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}" if int(err) == 0 else None
    except Exception:  # noqa: BLE001  (no cuda-bindings, or no libnvrtc: pip install nvidia-cuda-nvrtc)
        return None


# The Triton versions whose kernels (every registered Triton variant's inspect spec) were compiled for sm_90 and
# found to build: the pinned one and the GPU image's (README, "Versions").
VERIFIED_TRITON = ("3.6.0", "3.7.1")


def torch_triton_pin(requires: list[str] | None = None) -> str | None:
    """Return the triton version torch's wheel pins (``triton==3.6.0`` in its CUDA builds), or None (CPU builds)."""
    if requires is None:
        try:
            requires = md.requires("torch") or []
        except md.PackageNotFoundError:
            return None
    for req in requires:
        m = re.match(r"^\s*(?:pytorch-)?triton\s*==\s*([^\s;,]+)", req)
        if m:
            return m.group(1)
    return None


def triton_guard(triton: str | None = None, torch: str | None = None, pin: str | None = "auto") -> tuple[bool, str]:
    """Return (ok, one line) on the Triton in use: torch's pin kept, and whether this Triton was verified.

    Not ok when torch pins another triton than the installed one (GPU installs then break or miscompile) or when
    no Triton is installed. A Triton outside ``VERIFIED_TRITON`` is ok but said to be unverified.
    """
    import torch as _torch

    triton = _dist("triton") if triton is None else triton
    torch = _torch.__version__ if torch is None else torch
    pin = torch_triton_pin() if pin == "auto" else pin
    if not triton:
        return False, f"no triton installed (torch {torch}): the Triton variants cannot run; pip install triton"
    base = triton.split("+")[0]
    if pin and pin.split("+")[0] != base:
        return False, (f"torch {torch} pins triton=={pin} but triton {triton} is installed: keep the two in step "
                       f"(pip install triton=={pin}), or GPU runs break")
    kept = f"torch {torch} pins triton=={pin}: in step" if pin else f"torch {torch} pins no triton (a CPU build)"
    verified = ("verified" if base in VERIFIED_TRITON else
                f"NOT verified (verified: {', '.join(VERIFIED_TRITON)}); the kernels may not compile")
    return True, f"triton {triton}, {kept}; the Triton kernels' sm_90 compile is {verified}"


def driver_version() -> str | None:
    """Return the NVIDIA driver version from nvidia-smi, else from /proc/driver/nvidia/version; None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", f.read())
            return m.group(1) if m else None
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, Any]:
    """Return the versions of python, torch, triton, numba, numba-cuda, cupy, CUDA, nvcc, NVRTC and the driver."""
    import torch

    v = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _dist("triton"),
        "numba": _dist("numba"),
        "numba_cuda": _dist("numba-cuda"),
        "cupy": _cupy_version(),
        "cuda": torch.version.cuda,
        "nvcc": nvcc_version(),
        "nvrtc": nvrtc_version(),
        "driver": None,
        "workbench": _dist("kernel-workbench"),
    }
    if MODE == "gpu":
        v["driver"] = driver_version()
    return v


@functools.lru_cache(maxsize=1)
def device_info() -> dict[str, Any]:
    """Return {name, cc, sm_count, mem_gb} of the GPU in gpu mode, or a CPU description in cpu mode."""
    import torch

    if MODE == "gpu":
        p = torch.cuda.get_device_properties(0)
        return {"name": p.name, "cc": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
                "mem_gb": round(p.total_memory / 2**30, 1)}
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.+)", f.read())
            cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    return {"name": f"CPU emulation ({cpu})", "cc": None, "sm_count": None, "mem_gb": None}
