"""Decide, once per process, whether the workbench runs kernels natively ("gpu") or emulated ("cpu").

This module must run before numba is imported (numba reads ``NUMBA_ENABLE_CUDASIM`` once, at import) and before
any Triton kernel is defined (``@triton.jit`` picks the interpreter from ``TRITON_INTERPRET`` at decoration time).
``import workbench`` imports it first; the kernels in ``kernels/`` import workbench first.
"""

from __future__ import annotations

import os
import sys

_VALID = ("cpu", "gpu")


class ModeError(RuntimeError):
    """The workbench mode cannot be set up as asked."""


def _decide() -> tuple[str, str]:
    """Return (mode, why) from ``WORKBENCH_MODE`` or from whether torch sees a usable CUDA device."""
    forced = os.environ.get("WORKBENCH_MODE", "").strip().lower()
    if forced and forced not in _VALID:
        raise ModeError(f"WORKBENCH_MODE={forced!r} is not valid: expected one of {_VALID} (or unset to auto-detect)")
    import torch  # torch does not import numba or triton, so importing it here is safe

    has_cuda = bool(torch.cuda.is_available())
    if forced == "gpu":
        if not has_cuda:
            raise ModeError(
                "WORKBENCH_MODE=gpu but torch sees no usable CUDA device "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}). "
                "Unset WORKBENCH_MODE to fall back to cpu emulation, or install a CUDA build of torch."
            )
        return "gpu", "forced by WORKBENCH_MODE=gpu"
    if forced == "cpu":
        return "cpu", "forced by WORKBENCH_MODE=cpu"
    if has_cuda:
        return "gpu", f"torch sees CUDA device {torch.cuda.get_device_name(0)!r}"
    if torch.version.cuda is None:
        return "cpu", f"torch {torch.__version__} is a CPU-only build"
    return "cpu", "torch is a CUDA build but no usable CUDA device/driver was found"


def _check_not_contradicted(mode: str) -> None:
    """Raise if numba or triton was imported before us in a state that contradicts ``mode``."""
    want_sim = mode == "cpu"
    hint = "import workbench before numba/triton (first cell of the notebook), or restart the kernel"
    if "numba" in sys.modules:
        numba = sys.modules["numba"]
        sim = bool(getattr(getattr(numba, "config", None), "ENABLE_CUDASIM", 0))
        if sim != want_sim:
            raise ModeError(
                f"numba was imported with NUMBA_ENABLE_CUDASIM={int(sim)} but the workbench mode is {mode!r}, "
                f"which needs NUMBA_ENABLE_CUDASIM={int(want_sim)}: {hint}."
            )
    if "triton" in sys.modules:
        raw = os.environ.get("TRITON_INTERPRET", "0").strip().lower()
        interp = raw in ("1", "true", "on", "yes")
        if interp != want_sim:
            raise ModeError(
                f"triton was imported with TRITON_INTERPRET={'1' if interp else 'unset/0'} but the workbench mode "
                f"is {mode!r}, which needs TRITON_INTERPRET={'1' if want_sim else '0'}: "
                f"kernels defined so far would run the wrong way; {hint}."
            )


def _setup() -> tuple[str, str]:
    mode, why = _decide()
    _check_not_contradicted(mode)
    if mode == "cpu":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.environ["TRITON_INTERPRET"] = "1"
        from workbench import _numba_sim  # poisoned shared memory, checked launches: hooked when numba loads it

        _numba_sim.arm()
    else:
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        os.environ["TRITON_INTERPRET"] = "0"
    return mode, why


MODE, MODE_REASON = _setup()
