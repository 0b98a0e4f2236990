"""Name the dtypes the workbench knows, once: canonical names, the aliases people type, and their torch dtypes.

Every place that takes a dtype by name goes through here: the registry (:func:`workbench.registry.as_dtype`),
the roofline tables (:func:`workbench.hardware.canonical_dtype`), the benchmark record schema
(:mod:`workbench.results`) and the scripts. A canonical name is torch's own name without ``torch.``
(``"bfloat16"``); aliases (``"bf16"``, ``"half"``, ``"fp8"``, ...) and torch dtypes map onto it.

Importing this module does not import torch (:mod:`workbench.results` stays torch-free); :func:`to_torch` does.
"""

from __future__ import annotations

from typing import Any

#: Floating dtypes, widest first. The two ``fnuz`` float8 formats are AMD's; they are known so that a roofline
#: question about them gets the float8 peak rather than an error.
FLOATS: tuple[str, ...] = (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
)
#: Integer dtypes.
INTS: tuple[str, ...] = ("int8", "int32", "int64")
#: Every canonical name.
NAMES: tuple[str, ...] = FLOATS + INTS

#: Other spellings (lower case) and the canonical name each one means. Bare "float8"/"fp8" mean e4m3, the format
#: inference kernels use for weights and activations.
ALIASES: dict[str, str] = {
    "double": "float64", "fp64": "float64", "f64": "float64",
    "float": "float32", "fp32": "float32", "f32": "float32",
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "float8": "float8_e4m3fn", "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
}


def canonical(dtype: Any, among: tuple[str, ...] = NAMES) -> str:
    """Return the canonical name of a torch dtype, a canonical name or an alias, if it is one of ``among``.

    Case and a ``torch.`` prefix are ignored (``"torch.float16"``, ``"FP16"`` and ``torch.float16`` all give
    ``"float16"``). Raises ValueError naming the dtype and the accepted names otherwise.
    """
    raw = str(dtype).strip().lower().removeprefix("torch.")
    name = ALIASES.get(raw, raw)
    if name not in among:
        raise ValueError(
            f"unknown dtype {dtype!r}{f' (= {name})' if name != raw else ''}: expected a torch.dtype or one of "
            f"{list(among)} "
            f"(aliases: {', '.join(a for a, n in ALIASES.items() if n in among)})"
        )
    return name


def to_torch(dtype: Any) -> Any:
    """Return the ``torch.dtype`` for a torch dtype, a canonical name or an alias; ValueError when unknown."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    return getattr(torch, canonical(dtype))

