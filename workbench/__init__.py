"""Kernel Workbench: one registry, checker, timer, roofline and plots for learning GPU kernels.

Import this first (before numba or triton): it decides once whether kernels run natively on a GPU
(``mode() == "gpu"``) or emulated on the CPU (``"cpu"``: Triton interpreter, Numba CUDA simulator, numpy for
cupy, a CPU engine for CUDA C). ``WORKBENCH_MODE=cpu|gpu`` overrides the choice.
"""

from __future__ import annotations

from typing import Any

from workbench._mode import MODE, MODE_REASON, ModeError

__version__ = "0.1.0"


def mode() -> str:
    """Return ``"gpu"`` (kernels run natively) or ``"cpu"`` (kernels are emulated)."""
    return MODE


def device() -> Any:
    """Return the torch device every variant takes its inputs on: ``cuda`` in gpu mode, else ``cpu``."""
    import torch

    return torch.device("cuda" if MODE == "gpu" else "cpu")


from workbench.registry import (  # noqa: E402
    OpError,
    UnsupportedHere,
    Variant,
    empty,
    empty_like,
    get_op,
    known_wrong,
    make_inputs,
    ops,
    reference,
    register,
    variant,
    variants,
)

if MODE == "cpu":  # before any Triton kernel runs under the interpreter
    from workbench import _triton_interp

    _triton_interp.install()

_LAZY = {
    # name: (module, attribute)
    "check": ("workbench.checker", "check"),
    "CheckReport": ("workbench.checker", "CheckReport"),
    "bench": ("workbench.timer", "bench"),
    "peak_memory": ("workbench.timer", "peak_memory"),
    "profile": ("workbench.profile_counters", "profile"),  # wb.profile(fn, *inputs) -> Profile
    "counters_table": ("workbench.counters", "counters_table"),
    "invariance_table": ("workbench.invariance", "invariance_table"),
    "exercise": ("workbench.practice.exercises", "exercise"),
    "exercises": ("workbench.practice.exercises", "exercises"),
    "glossary": ("workbench.glossary_terms", "glossary"),
    "drills": ("workbench.practice", "drills"),
    "drill": ("workbench.practice", "drill"),
    "mock_interview": ("workbench.practice", "mock_interview"),
    "progress": ("workbench.practice", "progress"),
    "roofline": ("workbench.plots", "roofline"),
    "ladder_table": ("workbench.ladder", "ladder_table"),
    "explore": ("workbench.ui", "explore"),
    "show_source": ("workbench.ui", "show_source"),
    "diff": ("workbench.ui", "diff"),
    "check_table": ("workbench.ui", "check_table"),
    "bench_table": ("workbench.ui", "bench_table"),
    "save_html": ("workbench.plots", "save_html"),
    "inspect": ("workbench.inspection", "inspect"),
    "where": ("workbench.where_places", "where"),
    "occupancy": ("workbench.inspection", "occupancy"),
    "occupancy_widget": ("workbench.inspection", "occupancy_widget"),
    "cuda": ("workbench.cuda", None),
    "cupy": ("workbench.cupy", None),
    "cute": ("workbench.cute", None),  # CuTe DSL layouts (imports cutlass on first call)
    "hardware": ("workbench.hardware", None),
    "plots": ("workbench.plots", None),
    "results": ("workbench.results", None),
}


def __getattr__(name: str) -> Any:
    # Heavy parts (plotly, the CUDA engine, compilers) load on first use, keeping `import workbench` quick.
    if name in _LAZY:
        import importlib

        mod_name, attr = _LAZY[name]
        mod = importlib.import_module(mod_name)
        val = mod if attr is None else getattr(mod, attr)
        globals()[name] = val
        return val
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


__all__ = ["MODE", "MODE_REASON", "ModeError", "OpError", "UnsupportedHere", "Variant", "device", "empty",
           "empty_like", "get_op", "known_wrong", "make_inputs", "mode", "ops", "reference", "register",
           "variant", "variants", *sorted(_LAZY)]
