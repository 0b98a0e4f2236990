"""Collect the versions and device facts every benchmark record and `doctor` report carries."""

from __future__ import annotations

import functools
import importlib.metadata as md
import platform
import re
import shutil
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
    """Return nvcc's release string ('13.0, V13.0.88'), or None when nvcc is not on PATH."""
    exe = shutil.which("nvcc")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release ([^\n]+)", out)
    return m.group(1).strip() if m else out.strip().splitlines()[-1]


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, Any]:
    """Return the versions of python, torch, triton, numba, numba-cuda, cupy, CUDA and the driver."""
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
        "driver": None,
        "workbench": _dist("kernel-workbench"),
    }
    if MODE == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            v["driver"] = out.splitlines()[0] if out else None
        except (OSError, subprocess.SubprocessError):
            pass
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
