"""Describe the GPUs the workbench knows: datasheet peaks with their sources, and ceilings measured here.

Every number is DENSE (no 2:4 structured sparsity). NVIDIA datasheets print tensor-core rates "with
sparsity" and footnote that dense rates are half of them; this table stores the halved figure and says so
in its source note. Where a datasheet distinguishes fp16/bf16 tensor rates by accumulator, the fp32-accumulate
rate is stored (what a kernel with fp32 accumulators, torch's default, can reach): the GeForce RTX 4090 does
165.2 TFLOP/s there, not the 330.3 of fp16 accumulation.

Units: TFLOP/s (1e12 FLOP/s), GB/s (1e9 byte/s), memory and L2 sizes in GB / MB as the vendor prints them.
Arithmetic intensity is FLOP per byte of DRAM traffic; a ridge point is peak FLOP/s divided by bandwidth.

This module does not import torch at import time; only :func:`current_device` touches ``torch.cuda``,
and only in ``gpu`` mode.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench import dtypes

if TYPE_CHECKING:
    from workbench.cuda.arch import ArchLimits

__all__ = [
    "DEVICES",
    "DEFAULT_DEVICE",
    "DeviceSpec",
    "LINKS",
    "Link",
    "Source",
    "as_dict",
    "canonical_dtype",
    "current_device",
    "describe_unknown",
    "get_device",
    "get_link",
    "lookup",
    "measured_tflops",
    "peak_bandwidth",
    "peak_tflops",
    "ridge_point",
]


@dataclass(frozen=True)
class Source:
    """Say where a number comes from: the document's name, its address, and what was done to the figure."""

    document: str
    url: str
    note: str = ""


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU's datasheet peaks (dense), sizes, and any ceilings measured on it, each with its source.

    ``sources`` maps a field name (or ``"default"`` for every field not listed) to its :class:`Source`.
    Peak fields that are ``None`` mean the hardware has no such unit (e.g. no bf16 or fp8 tensor cores on
    a T4).
    """

    key: str
    name: str
    aliases: tuple[str, ...]
    arch: str
    cc: str
    sm_count: int
    mem_gb: float
    bandwidth_gbs: float
    l2_mb: float
    fp64_tflops: float
    fp64_tensor_tflops: float | None
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    sources: dict[str, Source]
    measured_bandwidth_gbs: float | None = None
    measured_tflops: dict[str, float] = field(default_factory=dict)
    measured_source: Source | None = None
    notes: str = ""

    @property
    def sm(self) -> str:
        """Return the CUDA target of this GPU's compute capability ('sm_90' for cc '9.0')."""
        return "sm_" + self.cc.replace(".", "")

    @property
    def limits(self) -> ArchLimits:
        """Return the per-SM limits of this GPU (shared memory, registers, threads, blocks) from the arch table.

        :mod:`workbench.cuda.arch` is the one source of those limits; a DeviceSpec holds only what differs
        between GPUs of one compute capability (SM count, memory, clocks, hence peaks).
        """
        from workbench.cuda import arch

        return arch.get(self.cc)

    def source(self, field_name: str) -> Source:
        """Return the source of ``field_name`` (its own entry, else the device's default source)."""
        if field_name.startswith("measured"):
            if self.measured_source is None:
                raise KeyError(f"{self.name} has no measured ceilings recorded")
            return self.measured_source
        return self.sources.get(field_name, self.sources["default"])


# ------------------------------------------------------------------------------------------------------------
# Sources. NVIDIA's documents, by name and address; "dense = sparse / 2" is stated where a figure was halved.

_H100_DS = Source(
    "NVIDIA H100 Tensor Core GPU Datasheet (H100 SXM column)",
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    "TF32/BF16/FP16/FP8 tensor figures are printed with sparsity "
    "(989/1,979/1,979/3,958 TFLOPS*); stored dense = half.",
)
_HOPPER_WP = Source(
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (GTC22), table 'NVIDIA H100 SXM5'",
    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "132 SMs, 50 MB L2, compute capability 9.0 for the SXM5 part.",
)
_H200_DS = Source(
    "NVIDIA H200 Tensor Core GPU Datasheet (H200 SXM column)",
    "https://www.nvidia.com/en-us/data-center/h200/",
    "Same Hopper GH100 compute as H100 SXM: TF32/BF16/FP16/FP8 printed with "
    "sparsity (989/1,979/1,979/3,958*); "
    "stored dense = half. 141 GB HBM3e at 4.8 TB/s.",
)
_H200_OBSERVED = Source(
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (GTC22), GH100 in its SXM5 configuration",
    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "H200 SXM is the same GH100 part as H100 SXM with HBM3e: 132 SMs, 50 MB L2, compute capability 9.0. "
    "The H200 datasheet does not print SM count or L2 size.",
)
_MEASURED_H200 = Source(
    "results/ceilings.md: measured on the project's H200 box (quoted from the GPU machine's notes; the raw "
    "measurement is not in the repository)",
    "results/ceilings.md",
    "device-to-device copy ~4.3 TB/s (bytes read + written); torch bf16 matmul 8192^3 ~770-800 TFLOP/s, stored as "
    "790. Date and timing method not recorded. Ceilings a real kernel can reach, not peaks.",
)
_A100_DS = Source(
    "NVIDIA A100 Tensor Core GPU Datasheet (A100 80GB SXM column)",
    ""
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    "Datasheet prints dense and sparse side by side (e.g. TF32 156 | 312*, "
    "BF16/FP16 312 | 624*); dense stored. "
    "80GB SXM: 2,039 GB/s HBM2e.",
)
_AMPERE_WP = Source(
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper",
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf",
    "108 SMs, 40 MB L2, compute capability 8.0; no FP8 tensor cores on Ampere.",
)
_L4_DS = Source(
    "NVIDIA L4 Tensor Core GPU Datasheet",
    "https://www.nvidia.com/en-us/data-center/l4/",
    "FP32 30.3 TFLOPS; TF32 120*, BF16/FP16 242*, FP8 485* TFLOPS printed "
    "with sparsity; stored dense = half. "
    "24 GB GDDR6, 300 GB/s.",
)
_ADA_WP = Source(
    "NVIDIA Ada GPU Architecture whitepaper v2.01 (appendix tables for GeForce RTX 4090 and L4)",
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
    "RTX 4090: 128 SMs, 72 MB L2, 1,008 GB/s, FP32 82.6; tensor rates printed "
    "dense/sparse, fp32-accumulate column "
    "stored (FP16/BF16 165.2, TF32 82.6, FP8 330.3; fp16-accumulate would be "
    "330.3/660.6). L4: 58 SMs, 48 MB L2. "
    "Ada FP64 is 1/64 of FP32 (not printed as a figure; derived).",
)
_T4_DS = Source(
    "NVIDIA T4 Tensor Core GPU Datasheet",
    ""
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
    "Single precision 8.1 TFLOPS; mixed precision (FP16/FP32) 65 TFLOPS (Turing "
    "has no sparsity: dense as printed); "
    "16 GB GDDR6, 320 GB/s. No TF32, BF16 or FP8 tensor cores on Turing.",
)
_TURING_WP = Source(
    "NVIDIA Turing GPU Architecture whitepaper",
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/turing-architecture/"
    "NVIDIA-Turing-Architecture-Whitepaper.pdf",
    "T4 (TU104): 40 SMs, 4 MB L2, compute capability 7.5; FP64 is 1/32 of FP32 "
    "(derived, not a datasheet figure).",
)


def _sizes_from(ds: Source, sizes: Source, *derived: str) -> dict[str, Source]:
    """Return a device's sources: peaks from the datasheet ``ds``; SM count, L2, cc and ``derived`` from ``sizes``."""
    return {"default": ds, **dict.fromkeys(("sm_count", "l2_mb", "cc", *derived), sizes)}


# One row per GPU. Sizes: product name, architecture, compute capability, SMs, memory (GB), bandwidth (GB/s), L2 (MB).
# Dense datasheet peaks in TFLOP/s: fp64, fp64 tensor, fp32, tf32, fp16, bf16, fp8 (None: no such unit).
_SIZES: dict[str, tuple[str, str, str, int, float, float, float]] = {
    "H100-SXM": ("NVIDIA H100 SXM", "Hopper", "9.0", 132, 80, 3350, 50),
    "H200": ("NVIDIA H200 SXM", "Hopper", "9.0", 132, 141, 4800, 50),
    "A100-SXM-80GB": ("NVIDIA A100 80GB SXM", "Ampere", "8.0", 108, 80, 2039, 40),
    "L4": ("NVIDIA L4", "Ada Lovelace", "8.9", 58, 24, 300, 48),
    "RTX4090": ("NVIDIA GeForce RTX 4090", "Ada Lovelace", "8.9", 128, 24, 1008, 72),
    "T4": ("NVIDIA T4", "Turing", "7.5", 40, 16, 320, 4),
}
_PEAKS: dict[str, tuple[float | None, ...]] = {
    "H100-SXM": (34, 67, 67, 494.5, 989.5, 989.5, 1979),
    "H200": (34, 67, 67, 494.5, 989.5, 989.5, 1979),
    "A100-SXM-80GB": (9.7, 19.5, 19.5, 156, 312, 312, None),
    "L4": (0.47, None, 30.3, 60, 121, 121, 242.5),
    "RTX4090": (1.29, None, 82.6, 82.6, 165.2, 165.2, 330.3),
    "T4": (0.25, None, 8.1, None, 65, None, None),
}
_PEAK_FIELDS = ("fp64_tflops", "fp64_tensor_tflops", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops",
                "fp8_tflops")
#: The names torch reports (and people type) for each GPU.
_ALIASES: dict[str, tuple[str, ...]] = {
    "H100-SXM": ("NVIDIA H100 80GB HBM3", "H100 SXM", "H100 SXM5", "H100"),
    "H200": ("NVIDIA H200", "H200 SXM", "H200 SXM5", "H200"),
    "A100-SXM-80GB": ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "A100 80GB SXM", "A100 SXM4 80GB"),
    "L4": ("NVIDIA L4", "L4"),
    "RTX4090": ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "RTX 4090", "RTX4090"),
    "T4": ("Tesla T4", "NVIDIA T4", "T4"),
}
_SOURCES: dict[str, dict[str, Source]] = {
    "H100-SXM": _sizes_from(_H100_DS, _HOPPER_WP),
    "H200": _sizes_from(_H200_DS, _H200_OBSERVED),
    "A100-SXM-80GB": _sizes_from(_A100_DS, _AMPERE_WP),
    "L4": _sizes_from(_L4_DS, _ADA_WP, "fp64_tflops"),
    "RTX4090": {"default": _ADA_WP},
    "T4": _sizes_from(_T4_DS, _TURING_WP, "fp64_tflops"),
}
_NOTES: dict[str, str] = {
    "H100-SXM": "'NVIDIA H100 PCIe' and 'NVIDIA H100 NVL' are different parts (fewer SMs, other memory): not matched.",
    "H200": "The project's reference GPU. 'NVIDIA H200 NVL' (PCIe, lower power) is a different part: not matched.",
    "A100-SXM-80GB": "The 40GB SXM (1,555 GB/s) and 80GB PCIe (1,935 GB/s) parts differ in bandwidth: not matched.",
    "RTX4090": "GeForce tensor rates with fp32 accumulation are half those with fp16 accumulation; fp32-acc stored.",
    "T4": "torch reports this card as 'Tesla T4'. No bf16 hardware: bf16 kernels run emulated, slowly.",
}
#: Ceilings measured on a real GPU (a copy's bandwidth, a vendor matmul's TFLOP/s), where one was measured.
_MEASURED: dict[str, dict[str, Any]] = {
    "H200": {"measured_bandwidth_gbs": 4300, "measured_tflops": {"bfloat16": 790}, "measured_source": _MEASURED_H200},
}


def _device(key: str) -> DeviceSpec:
    name, arch, cc, sm_count, mem_gb, bandwidth_gbs, l2_mb = _SIZES[key]
    return DeviceSpec(key=key, name=name, aliases=_ALIASES[key], arch=arch, cc=cc, sm_count=sm_count, mem_gb=mem_gb,
                      bandwidth_gbs=bandwidth_gbs, l2_mb=l2_mb, **dict(zip(_PEAK_FIELDS, _PEAKS[key], strict=True)),
                      sources=_SOURCES[key], notes=_NOTES.get(key, ""), **_MEASURED.get(key, {}))


DEVICES: dict[str, DeviceSpec] = {key: _device(key) for key in _SIZES}

#: The device whose datasheet ceilings are drawn when no GPU is present: the project's reference H200 box.
DEFAULT_DEVICE = "H200"

# ------------------------------------------------------------------------------------------------------------


def _norm(name: str) -> str:
    s = re.sub(r"[\s_\-]+", " ", name.strip().lower())
    return s.removeprefix("nvidia ").strip()


_INDEX: dict[str, str] = {}
for _spec in DEVICES.values():
    for _n in (_spec.key, _spec.name, *_spec.aliases):
        _INDEX.setdefault(_norm(_n), _spec.key)


def lookup(name: str) -> DeviceSpec | None:
    """Return the spec whose key, name or alias matches ``name``, or None.

    ``name`` is typically ``torch.cuda.get_device_name()``. Matching ignores case, repeated spaces, '-'/'_'
    and a leading 'NVIDIA', but is otherwise exact: 'NVIDIA H100 PCIe' does not match the H100 SXM entry,
    because its peaks differ.
    """
    if isinstance(name, DeviceSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"lookup() expects a device name string, got {type(name).__name__}")
    key = _INDEX.get(_norm(name))
    return DEVICES[key] if key else None


def describe_unknown(name: str | None) -> str:
    """Return the message shown for a GPU with no datasheet entry, listing the known ones."""
    known = ", ".join(f"{s.key} ({s.name})" for s in DEVICES.values())
    who = f"{name!r}" if name else "this GPU"
    return (
        f"No datasheet entry for {who}: peaks and ceilings are unknown, so no roofline or % of peak. "
        f"Known devices: {known}. Add a DeviceSpec to workbench/hardware.py (with sources) to include it."
    )


def get_device(device: DeviceSpec | str) -> DeviceSpec:
    """Return the spec for ``device`` (a spec, key, name or alias).

    Raises KeyError, listing the known devices, when there is no datasheet entry for it.
    """
    spec = lookup(device)
    if spec is None:
        raise KeyError(describe_unknown(str(device)))
    return spec


def current_device(index: int = 0) -> DeviceSpec | None:
    """Return the spec of the CUDA device in use, or None in cpu mode or when it has no datasheet entry.

    In ``gpu`` mode (``workbench._mode.MODE``) this asks ``torch.cuda.get_device_name(index)``; an unknown
    GPU gives a warning listing the known devices and None.
    """
    from workbench._mode import MODE  # imported here: keeps this module free of torch at import time

    if MODE != "gpu":
        return None
    import torch

    name = torch.cuda.get_device_name(index)
    spec = lookup(name)
    if spec is None:
        warnings.warn(describe_unknown(name), stacklevel=2)
    return spec


# ------------------------------------------------------------------------------------------------------------
# dtypes

_PEAK_FIELD = {
    "float64": "fp64_tflops",
    "float32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "float16": "fp16_tflops",
    "bfloat16": "bf16_tflops",
    "float8": "fp8_tflops",
}


def canonical_dtype(dtype: Any) -> str:
    """Return the plain name ('float32', 'bfloat16', 'float8_e4m3fn', ...) of a torch dtype or a string.

    Raises ValueError for anything that is not a floating dtype the workbench knows.
    """
    if str(dtype).strip().lower() in ("tf32", "tensorfloat32"):
        return "tf32"
    try:
        return dtypes.canonical(dtype, among=dtypes.FLOATS)
    except ValueError as e:
        raise ValueError(f"{e}; or 'tf32' for TF32 tensor-core math") from None


def _peak_class(dtype: Any) -> str:
    canon = canonical_dtype(dtype)
    return "float8" if canon.startswith("float8") else canon


def peak_tflops(
    device: DeviceSpec | str, dtype: Any, *, tf32: bool = False, fp64_tensor: bool = False
) -> float:
    """Return the dense datasheet peak in TFLOP/s for ``dtype`` on ``device``.

    float32 means the SIMT (CUDA-core) rate unless ``tf32=True`` (tensor cores with TF32 inputs); float64
    means the SIMT rate unless ``fp64_tensor=True``; float16/bfloat16/float8 mean the tensor-core rate with
    fp32 accumulation.
    Raises KeyError for an unknown device and ValueError when the device has no such unit (e.g. bf16 on a T4).
    """
    spec = get_device(device)
    cls = _peak_class(dtype)
    if cls == "float32" and tf32:
        cls = "tf32"
    fname = _PEAK_FIELD[cls]
    if cls == "float64" and fp64_tensor:
        fname = "fp64_tensor_tflops"
    value = getattr(spec, fname)
    if value is None:
        raise ValueError(
            f"{spec.name} ({spec.arch}) has no {fname.removesuffix('_tflops').replace('_', ' ')} unit in its "
            f"datasheet, so there is no peak for dtype {canonical_dtype(dtype)!r}"
            + (" with tf32=True" if tf32 else "")
        )
    return float(value)


def measured_tflops(device: DeviceSpec | str, dtype: Any) -> float | None:
    """Return the measured compute ceiling (TFLOP/s) for ``dtype`` on ``device``, or None if none recorded."""
    spec = get_device(device)
    return spec.measured_tflops.get(canonical_dtype(dtype))


def peak_bandwidth(device: DeviceSpec | str, measured: bool = False) -> float | None:
    """Return the memory bandwidth in GB/s: datasheet peak, or with ``measured=True`` the measured ceiling.

    The measured value is None when none was recorded for this device.
    """
    spec = get_device(device)
    if measured:
        return spec.measured_bandwidth_gbs
    return float(spec.bandwidth_gbs)


def ridge_point(device: DeviceSpec | str, dtype: Any, *, tf32: bool = False, measured: bool = False) -> float:
    """Return the ridge point in FLOP/byte: peak TFLOP/s over bandwidth, where the roofline turns flat.

    Kernels with lower arithmetic intensity are memory-bound, higher ones compute-bound. With
    ``measured=True`` the measured ceilings are used where recorded (each falls back to its datasheet
    value otherwise).
    """
    tflops = peak_tflops(device, dtype, tf32=tf32)
    bw = peak_bandwidth(device)
    if measured:
        tflops = measured_tflops(device, dtype) or tflops
        bw = peak_bandwidth(device, measured=True) or bw
    return tflops * 1e12 / (bw * 1e9)


def as_dict(spec: DeviceSpec) -> dict[str, Any]:
    """Return ``spec`` as plain JSON-able data (sources included)."""
    return dataclasses.asdict(spec)


# ------------------------------------------------------------------------------------------------------------
# Interconnects: what one GPU can send to the others, per direction (a collective's busbw compares to this).


@dataclass(frozen=True)
class Link:
    """One GPU's link to the other GPUs: bandwidth per direction (GB/s) and a per-message latency (us), sourced.

    ``bandwidth_gbs`` is what one GPU can send while it also receives as much (vendors print the sum of both
    directions: NVLink 4's 900 GB/s is 450 GB/s each way). ``latency_us`` is the alpha of an alpha-beta model: the
    fixed cost of one step of a collective (a message through the link, its synchronisation and launch), an
    assumption stated in ``latency_source`` where no vendor prints one.
    """

    key: str
    name: str
    bandwidth_gbs: float
    latency_us: float
    source: Source
    latency_source: Source


_HOPPER_NVLINK = Source(
    "NVIDIA H100 and H200 Tensor Core GPU datasheets (SXM columns, 'NVLink: 900GB/s'); H100 architecture "
    "whitepaper (GTC22): 18 fourth-generation NVLink links, 900 GB/s total bandwidth",
    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "900 GB/s is the total of both directions over 18 links (50 GB/s each, 25 GB/s each way): 450 GB/s per "
    "direction is stored. In an 8-GPU HGX/DGX node every GPU reaches every other through NVSwitch at that rate.",
)
_IB_NDR = Source(
    "NVIDIA ConnectX-7 (InfiniBand NDR, 400 Gb/s per port); DeepEP's V1 README (docs/legacy.md): 'CX7 InfiniBand "
    "400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)'",
    "https://github.com/deepseek-ai/DeepEP/blob/main/docs/legacy.md",
    "400 Gb/s = 50 GB/s per direction per port; DGX H100/H200 nodes have one such port per GPU. Stored 50 GB/s.",
)
_LATENCY_ASSUMED = Source(
    "assumption (not a datasheet figure)",
    "",
    "Order of magnitude of one collective step's fixed cost on GPUs (kernel, synchronisation, a message's "
    "flight): a few microseconds inside a node, more across the network. Used only for the small-message end "
    "of model curves; measure with nccl-tests for real figures.",
)

LINKS: dict[str, Link] = {
    "nvlink4": Link("nvlink4", "NVLink 4 (H100/H200 SXM, through NVSwitch)", 450.0, 3.0, _HOPPER_NVLINK,
                    _LATENCY_ASSUMED),
    "ib_ndr": Link("ib_ndr", "InfiniBand NDR (ConnectX-7, 400 Gb/s per GPU)", 50.0, 6.0, _IB_NDR, _LATENCY_ASSUMED),
}


def get_link(link: Link | str) -> Link:
    """Return the :class:`Link` named ``link`` ('nvlink4', 'ib_ndr'), or raise KeyError listing the known ones."""
    if isinstance(link, Link):
        return link
    if link not in LINKS:
        raise KeyError(f"unknown link {link!r}; known links: {', '.join(LINKS)} (add one to workbench/hardware.py "
                       "with its source)")
    return LINKS[link]
