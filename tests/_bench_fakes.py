"""Build fake benchmark records and registry variants for the hardware/results/plots tests."""

from __future__ import annotations

from typing import Any

VERSIONS = {
    "python": "3.12.3", "torch": "2.13.0", "triton": "3.7.1", "numba": "0.68.1", "numba_cuda": "0.30.4",
    "cupy": "14.2.0", "cuda": "13.0", "driver": "580.159.03",
}
H200 = {"name": "NVIDIA H200", "cc": "9.0", "sm_count": 132, "mem_gb": 139.8}


def make_record(
    variant: str = "tiled",
    n: int = 1024,
    *,
    op: str = "gemm",
    dtype: str = "float16",
    time_ms: float = 1.0,
    emulated: bool = False,
    device: dict[str, Any] | None = None,
    date: str = "2026-10-28",
) -> dict[str, Any]:
    """Return a valid record of an n x n x n GEMM (flops 2n^3, bytes 3 n^2 * itemsize)."""
    item = {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    flops = 2.0 * n**3
    nbytes = 3.0 * n * n * item
    sec = time_ms * 1e-3
    return {
        "op": op, "variant": variant, "backend": "triton", "shape": {"M": n, "N": n, "K": n},
        "dtype": dtype, "time_ms": time_ms, "p20_ms": time_ms * 0.97, "p80_ms": time_ms * 1.05,
        "flops": flops, "bytes": nbytes,
        "tflops": None if emulated else flops / sec / 1e12,
        "gbps": None if emulated else nbytes / sec / 1e9,
        "pct_peak": None if emulated else 42.0,
        "bound": None if emulated else "compute",
        "emulated": emulated, "device": dict(device or H200), "versions": dict(VERSIONS), "date": date,
        "command": "python -m workbench bench --op gemm",
    }


class FakeVariant:
    """Stand in for the registry's Variant: name, backend, idea, flops(**shape, dtype=), bytes(**shape, dtype=)."""

    def __init__(self, name: str, reuse: float, backend: str = "triton", idea: str = "an idea") -> None:
        self.name, self.backend, self.idea, self.reuse = name, backend, idea, reuse

    def flops(self, M: int, N: int, K: int, dtype: Any = "float32") -> float:
        return 2.0 * M * N * K

    def bytes(self, M: int, N: int, K: int, dtype: Any = "float32") -> float:
        item = 4 if "32" in str(dtype) else 2
        # naive reads A and B once per output tile of width `reuse`
        return item * (M * K * N / self.reuse + K * N * M / self.reuse + M * N)
