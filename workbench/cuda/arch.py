"""Per-architecture SM limits and the theoretical-occupancy calculation.

Sources:
* NVIDIA CUDA C++ Programming Guide, "Compute Capabilities" -> "Features and Technical Specifications",
  table "Technical Specifications per Compute Capability" (max threads/warps/blocks per SM, 32-bit registers per
  SM and per thread block, max registers per thread, max shared memory per SM and per block).
* NVIDIA CUDA Occupancy Calculator (the spreadsheet shipped with the toolkit and its reimplementation in Nsight
  Compute): register allocation unit (256 registers, per warp), warp allocation granularity (4), shared-memory
  allocation unit (256 B on 7.x, 128 B on 8.x/9.0) and the 1 KB of shared memory reserved per block by the
  system on 8.x/9.0 ("CUDA reserves 1 KB of shared memory per thread block", Programming Guide, 8.x/9.0
  shared-memory sections).
Shared memory per SM is the largest carve-out; the per-block maximum is the opt-in limit (48 KB without
``cudaFuncAttributeMaxDynamicSharedMemorySize``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Resource limits of one SM of a compute capability."""

    name: str
    compute_capability: tuple[int, int]
    example_gpus: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    reg_alloc_unit: int  # registers, allocated per warp
    warp_alloc_granularity: int
    max_smem_per_sm: int  # bytes (largest carve-out)
    max_smem_per_block: int  # bytes (opt-in maximum)
    default_smem_per_block: int  # bytes without opt-in
    smem_alloc_unit: int  # bytes
    smem_reserved_per_block: int  # bytes reserved by the system per block
    warp_size: int = 32

    def to_dict(self) -> dict:
        """Return the limits as a plain dict."""
        return asdict(self)


ARCHS: dict[str, ArchLimits] = {
    "sm_75": ArchLimits("sm_75", (7, 5), "T4, RTX 20xx", 1024, 32, 16, 1024, 65536, 65536, 255, 256, 4,
                        64 * KB, 64 * KB, 48 * KB, 256, 0),
    "sm_80": ArchLimits("sm_80", (8, 0), "A100, A30", 2048, 64, 32, 1024, 65536, 65536, 255, 256, 4,
                        164 * KB, 163 * KB, 48 * KB, 128, 1 * KB),
    "sm_86": ArchLimits("sm_86", (8, 6), "A10, A40, RTX 30xx", 1536, 48, 16, 1024, 65536, 65536, 255, 256, 4,
                        100 * KB, 99 * KB, 48 * KB, 128, 1 * KB),
    "sm_89": ArchLimits("sm_89", (8, 9), "L4, L40S, RTX 40xx", 1536, 48, 24, 1024, 65536, 65536, 255, 256, 4,
                        100 * KB, 99 * KB, 48 * KB, 128, 1 * KB),
    "sm_90": ArchLimits("sm_90", (9, 0), "H100, H200", 2048, 64, 32, 1024, 65536, 65536, 255, 256, 4,
                        228 * KB, 227 * KB, 48 * KB, 128, 1 * KB),
}


def get(arch: str) -> ArchLimits:
    """Return the limits of ``arch`` ("sm_90", "sm90", "90", "9.0" or "sm_90a")."""
    a = str(arch).strip().lower().replace("compute_", "sm_")
    if a.endswith("a") and a[:-1].replace("sm_", "").replace("sm", "").isdigit():
        a = a[:-1]
    if a.replace(".", "").isdigit():
        a = "sm_" + a.replace(".", "")
    if a.startswith("sm") and not a.startswith("sm_"):
        a = "sm_" + a[2:]
    if a not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}: expected one of {', '.join(ARCHS)}")
    return ARCHS[a]


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def _floor_to(x: int, m: int) -> int:
    return (x // m) * m


def occupancy(threads_per_block: int, regs_per_thread: int, smem_per_block: int = 0, arch: str = "sm_90") -> dict:
    """Return the theoretical occupancy of a kernel on ``arch`` (like the CUDA Occupancy Calculator).

    ``smem_per_block`` is static + dynamic shared memory in bytes. The result holds the blocks per SM, active
    warps and threads per SM, the occupancy fraction, the block limit imposed by each resource and
    ``limited_by`` (the resources that reach the minimum: "threads", "registers", "shared memory", "blocks").
    """
    L = get(arch)
    if threads_per_block < 1:
        raise ValueError(f"occupancy: threads_per_block must be >= 1, got {threads_per_block}")
    if regs_per_thread < 0 or smem_per_block < 0:
        raise ValueError("occupancy: regs_per_thread and smem_per_block must be >= 0")
    notes = []
    warps_per_block = -(-threads_per_block // L.warp_size)
    # threads / warps
    by_warps = L.max_warps_per_sm // warps_per_block if threads_per_block <= L.max_threads_per_block else 0
    if threads_per_block > L.max_threads_per_block:
        notes.append(f"{threads_per_block} threads per block exceeds the limit of {L.max_threads_per_block}")
    # registers (allocated per warp, in units of reg_alloc_unit; warps in groups of warp_alloc_granularity)
    regs = max(regs_per_thread, 1)
    regs_per_warp = _ceil_to(regs * L.warp_size, L.reg_alloc_unit)
    if regs_per_thread > L.max_regs_per_thread:
        by_regs = 0
        notes.append(f"{regs_per_thread} registers per thread exceeds the limit of {L.max_regs_per_thread}")
    else:
        warps_by_regs = _floor_to(L.max_regs_per_block // regs_per_warp, L.warp_alloc_granularity)
        by_regs = (warps_by_regs // warps_per_block) * (L.regs_per_sm // L.max_regs_per_block)
    # shared memory
    smem_alloc = _ceil_to(smem_per_block + L.smem_reserved_per_block, L.smem_alloc_unit)
    if smem_per_block > L.max_smem_per_block:
        by_smem = 0
        notes.append(f"{smem_per_block} B of shared memory per block exceeds the limit of {L.max_smem_per_block} B")
    else:
        by_smem = L.max_smem_per_sm // smem_alloc if smem_alloc else L.max_blocks_per_sm
    if smem_per_block > L.default_smem_per_block and smem_per_block <= L.max_smem_per_block:
        notes.append(f"more than {L.default_smem_per_block // KB} KB of shared memory per block needs the "
                     "cudaFuncAttributeMaxDynamicSharedMemorySize opt-in")
    limits = {"threads": by_warps, "registers": by_regs, "shared memory": by_smem, "blocks": L.max_blocks_per_sm}
    blocks = min(limits.values())
    limited_by = [k for k, v in limits.items() if v == blocks]
    warps = blocks * warps_per_block
    return {
        "arch": L.name,
        "threads_per_block": threads_per_block,
        "regs_per_thread": regs_per_thread,
        "smem_per_block": smem_per_block,
        "warps_per_block": warps_per_block,
        "regs_per_warp_allocated": regs_per_warp,
        "smem_per_block_allocated": smem_alloc,
        "blocks_per_sm": blocks,
        "active_warps_per_sm": warps,
        "active_threads_per_sm": warps * L.warp_size,
        "max_warps_per_sm": L.max_warps_per_sm,
        "occupancy": warps / L.max_warps_per_sm,
        "block_limits": limits,
        "limited_by": limited_by,
        "notes": notes,
    }
