"""The model answers of the napkin drills, computed from the hardware tables and the ops' own formulas.

Each function takes the question's parameters (a napkin drill's ``args`` in its drills.toml) and returns a
:class:`Napkin`: the value, its unit, the derivation as steps a learner can follow, and the facts (``given``)
the question quotes from ``workbench.hardware`` / ``workbench.cuda.arch`` so that no number is typed twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from workbench import hardware
from workbench.cuda import arch as _arch

KIB, MIB, GIB = 2**10, 2**20, 2**30

ELEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int32": 4}


@dataclass(frozen=True)
class Napkin:
    """A computed napkin answer: ``value`` in ``unit``, the derivation ``steps``, the quoted ``given`` facts."""

    value: float
    unit: str
    steps: tuple[str, ...]
    given: dict[str, Any] = field(default_factory=dict)

    def derivation(self) -> str:
        """Return the steps as a markdown list ending in the answer."""
        return "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1)) + f"\n\n= **{fmt(self.value)} {self.unit}**"


def fmt(x: float) -> str:
    """Return ``x`` with 4 significant digits, thousands separated ("1,234", "0.2441", "3.2e+12")."""
    if x == 0:
        return "0"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        return f"{x:.4g}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _elem(dtype: str) -> int:
    if dtype not in ELEM_BYTES:
        raise ValueError(f"napkin: unknown dtype {dtype!r}; known: {sorted(ELEM_BYTES)}")
    return ELEM_BYTES[dtype]


def _device(device: str) -> hardware.DeviceSpec:
    return hardware.get_device(device)


def _op(name: str) -> Any:
    import workbench as wb

    return wb.get_op(name)


def _shape_text(shape: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


# ----------------------------------------------------------------------------------------------- bytes and FLOPs


def op_bytes(op: str, dtype: str, unit: str = "MB", **shape: Any) -> Napkin:
    """Minimum DRAM bytes of one call of ``op`` (the op's own formula), in MB (1e6) or GB (1e9)."""
    spec = _op(op)
    b = spec.bytes(dtype=dtype, **shape)
    scale = {"MB": 1e6, "GB": 1e9}[unit]
    return Napkin(b / scale, unit, (f"{op}'s contract: {spec.doc}",
                                    f"bytes({_shape_text(shape)}, {dtype}) = {fmt(b)} B"))


def op_intensity(op: str, dtype: str, **shape: Any) -> Napkin:
    """Arithmetic intensity (FLOP per DRAM byte) of one call of ``op``."""
    spec = _op(op)
    f, b = spec.flops(**shape), spec.bytes(dtype=dtype, **shape)
    return Napkin(f / b, "FLOP/B", (f"FLOPs = {fmt(f)} ({op}'s formula at {_shape_text(shape)})",
                                    f"bytes = {fmt(b)} (each input read once, the output written once, {dtype})",
                                    f"intensity = {fmt(f)} / {fmt(b)}"))


def ridge(device: str, dtype: str) -> Napkin:
    """Ridge point (FLOP/B) of ``device`` for ``dtype``: datasheet peak over datasheet bandwidth."""
    d = _device(device)
    peak, bw = hardware.peak_tflops(d, dtype), hardware.peak_bandwidth(d)
    return Napkin(hardware.ridge_point(d, dtype), "FLOP/B",
                  (f"{d.name} {dtype} peak = {fmt(peak)} TFLOP/s (dense), bandwidth = {fmt(bw)} GB/s",
                   f"ridge = {fmt(peak)}e12 / {fmt(bw)}e9"),
                  {"peak_tflops": fmt(peak), "bandwidth_gbs": fmt(bw), "device_name": d.name})


def time_at_bandwidth(op: str, device: str, dtype: str, **shape: Any) -> Napkin:
    """Best-case time in microseconds of a memory-bound ``op``: its minimum bytes at the datasheet bandwidth."""
    d = _device(device)
    spec = _op(op)
    b = spec.bytes(dtype=dtype, **shape)
    bw = hardware.peak_bandwidth(d)
    return Napkin(b / (bw * 1e9) * 1e6, "us",
                  (f"bytes = {fmt(b)} ({op}'s formula at {_shape_text(shape)}, {dtype})",
                   f"time = bytes / bandwidth = {fmt(b)} / {fmt(bw)}e9 B/s"),
                  {"bandwidth_gbs": fmt(bw), "device_name": d.name})


def roofline_time(op: str, device: str, dtype: str, **shape: Any) -> Napkin:
    """Roofline lower bound in microseconds: max(FLOPs at peak, bytes at bandwidth)."""
    d = _device(device)
    spec = _op(op)
    f, b = spec.flops(**shape), spec.bytes(dtype=dtype, **shape)
    peak, bw = hardware.peak_tflops(d, dtype), hardware.peak_bandwidth(d)
    t_c, t_m = f / (peak * 1e12) * 1e6, b / (bw * 1e9) * 1e6
    bound = "compute" if t_c >= t_m else "memory"
    return Napkin(max(t_c, t_m), "us",
                  (f"FLOPs = {fmt(f)}; at {fmt(peak)} TFLOP/s: {fmt(t_c)} us",
                   f"bytes = {fmt(b)}; at {fmt(bw)} GB/s: {fmt(t_m)} us",
                   f"the larger bounds the time: {bound}-bound"),
                  {"peak_tflops": fmt(peak), "bandwidth_gbs": fmt(bw), "device_name": d.name})


def op_tflop(op: str, **shape: Any) -> Napkin:
    """FLOPs of one call of ``op`` in TFLOP (1e12), from the op's formula."""
    spec = _op(op)
    f = spec.flops(**shape)
    return Napkin(f / 1e12, "TFLOP", (f"{op}'s FLOP formula at {_shape_text(shape)}: {fmt(f)} FLOP",))


# ----------------------------------------------------------------------------------------------- on-chip resources


def smem_per_stage(BM: int, BN: int, BK: int, dtype: str, stages: int) -> Napkin:  # noqa: N803
    """Shared memory (KiB) of a pipelined GEMM: an A tile BMxBK and a B tile BKxBN per stage, ``stages`` stages."""
    e = _elem(dtype)
    per = (BM * BK + BK * BN) * e
    lim = _arch.get("sm_90")
    return Napkin(per * stages / KIB, "KiB",
                  (f"per stage: (BM*BK + BK*BN) * {e} B = ({BM}*{BK} + {BK}*{BN}) * {e} = {fmt(per)} B",
                   f"{stages} stages: {fmt(per * stages)} B = {fmt(per * stages / KIB)} KiB"),
                  {"smem_limit_kib": lim.max_smem_per_block // KIB})


def occupancy(threads: int, regs: int, smem_kib: float = 0, arch: str = "sm_90") -> Napkin:
    """Theoretical occupancy (% of the SM's warp slots) from threads, registers and shared memory per block."""
    o = _arch.occupancy(threads, regs, int(smem_kib * KIB), arch)
    lim = _arch.get(arch)
    lines = [f"{arch}: {lim.regs_per_sm} registers, {lim.max_warps_per_sm} warps, "
             f"{lim.max_smem_per_sm // KIB} KiB shared memory per SM; registers are allocated per warp in units of "
             f"{lim.reg_alloc_unit}",
             f"registers per warp: ceil({regs} * 32 / {lim.reg_alloc_unit}) * {lim.reg_alloc_unit} = "
             f"{o['regs_per_warp_allocated']}",
             f"blocks per SM allowed by each resource: {o['block_limits']}",
             f"{o['blocks_per_sm']} blocks * {o['warps_per_block']} warps = {o['active_warps_per_sm']} of "
             f"{o['max_warps_per_sm']} warps (limited by {', '.join(o['limited_by'])})"]
    return Napkin(100 * o["occupancy"], "%", tuple(lines),
                  {"regs_per_sm": lim.regs_per_sm, "max_warps": lim.max_warps_per_sm,
                   "smem_per_sm_kib": lim.max_smem_per_sm // KIB})


def blocks_per_sm(threads: int, regs: int, smem_kib: float, arch: str = "sm_90") -> Napkin:
    """Resident blocks per SM from threads, registers and shared memory per block (the occupancy calculator)."""
    o = _arch.occupancy(threads, regs, int(smem_kib * KIB), arch)
    lim = _arch.get(arch)
    return Napkin(o["blocks_per_sm"], "blocks",
                  (f"shared memory per block, rounded up to the {lim.smem_alloc_unit} B unit with the "
                   f"{lim.smem_reserved_per_block} B the system reserves: {o['smem_per_block_allocated']} B",
                   f"{lim.max_smem_per_sm} B per SM / {o['smem_per_block_allocated']} B = "
                   f"{o['block_limits']['shared memory']} blocks",
                   f"the other limits: {o['block_limits']}; the smallest wins"),
                  {"smem_per_sm_kib": lim.max_smem_per_sm // KIB, "smem_reserved": lim.smem_reserved_per_block})


def bank_conflict_ways(stride_words: int) -> Napkin:
    """Worst bank conflict (n-way) when lane t of a warp reads 32-bit word t * stride_words of shared memory."""
    banks: dict[int, set[int]] = {}
    for t in range(32):
        w = t * stride_words
        banks.setdefault(w % 32, set()).add(w)
    ways = max(len(s) for s in banks.values())
    return Napkin(ways, "-way", (f"lane t reads word t*{stride_words}; its bank is (t*{stride_words}) mod 32",
                                 f"{len(banks)} distinct banks hold the 32 words; the busiest holds {ways} different "
                                 "words, and the accesses to one bank serialise"))


def sectors_per_warp_load(stride_elems: int, dtype: str) -> Napkin:
    """32-byte sectors a warp's load touches when lane t reads element t * stride_elems."""
    e = _elem(dtype)
    sectors = {(t * stride_elems * e) // 32 for t in range(32)}
    useful = 32 * e
    return Napkin(len(sectors), "sectors",
                  (f"lane t reads byte offset t*{stride_elems}*{e}; a sector is 32 aligned bytes",
                   f"{len(sectors)} distinct sectors = {len(sectors) * 32} B moved for {useful} B used "
                   f"({100 * useful / (len(sectors) * 32):.0f}% efficiency)"))


def waves(M: int, N: int, BM: int, BN: int, device: str, blocks_per_sm: int = 1) -> Napkin:  # noqa: N803
    """Waves of a tiled GEMM grid: output tiles over the SMs' resident blocks, rounded up."""
    d = _device(device)
    tiles = math.ceil(M / BM) * math.ceil(N / BN)
    slots = d.sm_count * blocks_per_sm
    w = math.ceil(tiles / slots)
    return Napkin(w, "waves",
                  (f"tiles = ceil({M}/{BM}) * ceil({N}/{BN}) = {tiles}",
                   f"{d.sm_count} SMs * {blocks_per_sm} block(s) each = {slots} tiles at a time",
                   f"waves = ceil({tiles} / {slots}); the last one is {tiles - (w - 1) * slots}/{slots} full"),
                  {"sm_count": d.sm_count, "device_name": d.name})


def gemm_tile_intensity(BM: int, BN: int, dtype: str) -> Napkin:  # noqa: N803
    """FLOPs per byte loaded from global memory by one BMxBN output tile per K step (any BK)."""
    e = _elem(dtype)
    v = 2 * BM * BN / ((BM + BN) * e)
    return Napkin(v, "FLOP/B", (f"per K step of width BK: 2*BM*BN*BK FLOPs for (BM + BN)*BK*{e} bytes loaded",
                                f"BK cancels: 2*{BM}*{BN} / (({BM} + {BN}) * {e})"))


# ----------------------------------------------------------------------------------------------- models


def kv_cache(layers: int, kv_heads: int, head_dim: int, seq: int, batch: int, dtype: str) -> Napkin:
    """KV-cache size in GiB: K and V, per layer, per KV head, per position, per sequence."""
    e = _elem(dtype)
    b = 2 * layers * kv_heads * head_dim * seq * batch * e
    return Napkin(b / GIB, "GiB", (f"2 (K and V) * {layers} layers * {kv_heads} KV heads * {head_dim} * {seq} "
                                   f"positions * {batch} sequences * {e} B = {fmt(b)} B",))


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype: str) -> Napkin:
    """KiB of KV cache one token adds: K and V, per layer, per KV head, head_dim values each."""
    e = _elem(dtype)
    b = 2 * layers * kv_heads * head_dim * e
    return Napkin(b / KIB, "KiB", (f"2 (K and V) * {layers} layers * {kv_heads} KV heads * {head_dim} * {e} B "
                                   f"= {fmt(b)} B",
                                   f"{fmt(b)} / 1024 = {fmt(b / KIB)} KiB"))


def kv_tokens_fit(layers: int, kv_heads: int, head_dim: int, dtype: str, free_gib: float) -> Napkin:
    """Whole tokens of KV cache (all sequences together) that fit in ``free_gib`` GiB of HBM."""
    e = _elem(dtype)
    per = 2 * layers * kv_heads * head_dim * e
    n = math.floor(free_gib * GIB / per)
    return Napkin(n, "tokens", (f"per token: 2 (K and V) * {layers} layers * {kv_heads} KV heads * {head_dim} * {e} B "
                                f"= {fmt(per)} B",
                                f"{free_gib:g} GiB = {free_gib:g} * 2^30 B = {fmt(free_gib * GIB)} B",
                                f"floor({fmt(free_gib * GIB)} / {fmt(per)}) = {fmt(n)} tokens"))


def splits_to_fill(B: int, heads: int, per_sm: int, device: str) -> Napkin:  # noqa: N803
    """Fewest split-KV splits per (sequence, head) for ``per_sm`` blocks on every SM of ``device``."""
    d = _device(device)
    want = per_sm * d.sm_count
    s = math.ceil(want / (B * heads))
    return Napkin(s, "splits", (f"without splits: B * heads = {B} * {heads} = {B * heads} blocks",
                                f"wanted: {per_sm} blocks per SM * {d.sm_count} SMs = {want} blocks",
                                f"splits = ceil({want} / {B * heads}) = {s} ({B * heads * s} blocks)"),
                  {"sm_count": d.sm_count, "device_name": d.name})


def attention_scores_bytes(B: int, H: int, S: int, dtype: str) -> Napkin:  # noqa: N803
    """GiB of the S x S score matrix that standard attention writes (and reads back) per call."""
    e = _elem(dtype)
    b = B * H * S * S * e
    return Napkin(b / GIB, "GiB", (f"B*H*S*S*{e} B = {B}*{H}*{S}*{S}*{e} = {fmt(b)} B",))


def weights_read_time(params_b: float, dtype: str, device: str) -> Napkin:
    """Milliseconds to read every weight once at the datasheet bandwidth (batch-1 decode: one token per pass)."""
    d = _device(device)
    e = _elem(dtype)
    b = params_b * 1e9 * e
    bw = hardware.peak_bandwidth(d)
    return Napkin(b / (bw * 1e9) * 1e3, "ms", (f"weights = {params_b:g}e9 params * {e} B = {fmt(b)} B",
                                              f"at {fmt(bw)} GB/s: {fmt(b)} / {fmt(bw)}e9 s"),
                  {"bandwidth_gbs": fmt(bw), "device_name": d.name})


def padded_rows_bound(T: int, top_k: int, E: int, block: int) -> Napkin:  # noqa: N803
    """Upper bound on moe_align's n_padded: every expert's group rounded up to whole blocks."""
    v = T * top_k + E * (block - 1)
    return Napkin(v, "rows", (f"{T}*{top_k} = {T * top_k} routed slots",
                              f"each of the {E} groups gains at most block - 1 = {block - 1} padding rows",
                              f"{T * top_k} + {E}*{block - 1}"))


def block_scale_overhead(N: int, K: int, block: int) -> Napkin:  # noqa: N803
    """Bytes of fp32 block scales as a % of the e4m3 weight's bytes (one scale per block x block tile)."""
    scales = math.ceil(N / block) * math.ceil(K / block)
    return Napkin(100 * scales * 4 / (N * K), "%", (f"weight: {N}*{K} e4m3 = {fmt(N * K)} B",
                                                   f"scales: ceil({N}/{block})*ceil({K}/{block}) = {scales} fp32 "
                                                   f"= {fmt(scales * 4)} B"))


def splitk_workspace(M: int, N: int, splits: int) -> Napkin:  # noqa: N803
    """MiB of fp32 partial tiles a deterministic split-K GEMM writes before its fixed-order reduction."""
    b = M * N * splits * 4
    return Napkin(b / MIB, "MiB", (f"{splits} partial {M}x{N} results in fp32: {M}*{N}*{splits}*4 = {fmt(b)} B",))


def fp8_gemm_speedup(M: int, N: int, K: int, device: str) -> Napkin:  # noqa: N803
    """Roofline time ratio (bf16 over fp8) of a large GEMM: the fp8 tensor-core peak and halved bytes."""
    d = _device(device)
    t_bf = max(2 * M * N * K / (hardware.peak_tflops(d, "bfloat16") * 1e12),
               2 * (M * K + K * N + M * N) / (hardware.peak_bandwidth(d) * 1e9))
    t_f8 = max(2 * M * N * K / (hardware.peak_tflops(d, "float8_e4m3fn") * 1e12),
               (M * K + K * N + 2 * M * N) / (hardware.peak_bandwidth(d) * 1e9))
    return Napkin(t_bf / t_f8, "x", (f"bf16: max(FLOPs / {fmt(hardware.peak_tflops(d, 'bfloat16'))} TFLOP/s, "
                                     f"bytes / bandwidth) = {fmt(t_bf * 1e6)} us",
                                     f"fp8: max(FLOPs / {fmt(hardware.peak_tflops(d, 'float8_e4m3fn'))} TFLOP/s, "
                                     f"bytes / bandwidth) = {fmt(t_f8 * 1e6)} us (1-byte inputs, bf16 output)"),
                  {"fp8_tflops": fmt(hardware.peak_tflops(d, "float8_e4m3fn")),
                   "bf16_tflops": fmt(hardware.peak_tflops(d, "bfloat16")), "device_name": d.name})


def softmax_passes_time(M: int, N: int, dtype: str, device: str, reads: int) -> Napkin:  # noqa: N803
    """Microseconds of a softmax that reads x ``reads`` times and writes y once, at the datasheet bandwidth."""
    d = _device(device)
    e = _elem(dtype)
    b = (reads + 1) * M * N * e
    bw = hardware.peak_bandwidth(d)
    return Napkin(b / (bw * 1e9) * 1e6, "us", (f"({reads} reads + 1 write) * {M}*{N}*{e} B = {fmt(b)} B",
                                              f"at {fmt(bw)} GB/s"),
                  {"bandwidth_gbs": fmt(bw), "device_name": d.name})


def e4m3_step_at(value: float) -> Napkin:
    """Spacing (ulp) of e4m3 numbers around ``value``: 3 mantissa bits, so 2^(exponent - 3)."""
    e = math.floor(math.log2(abs(value)))
    step = 2.0 ** (e - 3)
    return Napkin(step, "", (f"{value:g} lies in [2^{e}, 2^{e + 1}) = [{2.0 ** e:g}, {2.0 ** (e + 1):g})",
                             f"e4m3 has 3 mantissa bits: 8 values per binade, spaced 2^{e}/8 = {step:g}"))


def fusion_bytes_saved(M: int, N: int, dtype: str, unit: str = "MB") -> Napkin:  # noqa: N803
    """DRAM bytes that fusing the residual add into RMSNorm saves against two kernels (add_rmsnorm's formula)."""
    from kernels.add_rmsnorm import fusion_bytes

    e = _elem(dtype)
    b = fusion_bytes(M, N, dtype)
    scale = {"MB": 1e6, "GB": 1e9}[unit]
    return Napkin(b["saved"] / scale, unit,
                  (f"two kernels: add reads x, r and writes s (3 x {M}*{N}), RMSNorm reads s, w and writes y "
                   f"(2 x {M}*{N} + {N}): {fmt(b['two_kernels'])} B at {e} B per element",
                   f"fused: read x, r, w and write s, y (4 x {M}*{N} + {N}): {fmt(b['fused'])} B",
                   f"saved: the re-read of s, {M}*{N}*{e} B = {fmt(b['saved'])} B"))


# ----------------------------------------------------------------------------------------------- CuTe layouts


def layout_offset(shape: list, stride: list, coord: list) -> Napkin:
    """Offset of a coordinate in a flat CuTe layout shape:stride: the coordinate's dot product with the stride."""
    terms = [f"{c}*{d}" for c, d in zip(coord, stride, strict=True)]
    v = sum(c * d for c, d in zip(coord, stride, strict=True))
    sh = ",".join(map(str, shape))
    st = ",".join(map(str, stride))
    layout, at = f"({sh}):({st})", f"({','.join(map(str, coord))})"
    return Napkin(v, "elements", (f"layout {layout}, coordinate {at}", f"offset = {' + '.join(terms)} = {v}"),
                  {"layout": layout, "at": at})


def smem_column_read(row_bytes: int, lanes: int, swizzle: str, count: str = "wavefronts") -> Napkin:
    """Wavefronts (or bank conflicts) of lanes 0..lanes-1 each reading the 16-byte chunk 0 of row r = lane.

    ``swizzle``: "none" or "B,M,S" applied to byte offsets (CuTe's Swizzle<B,M,S>). Counted by wb.profile's
    32-bank model (workbench.access_picture.Request): 16-byte accesses go 8 lanes per phase.
    """
    from workbench.access_picture import LaneAccess, Request
    from workbench.cute.algebra import Swizzle

    sw = None if swizzle == "none" else Swizzle(*(int(x) for x in swizzle.split(",")))
    addrs = [sw(r * row_bytes) if sw else r * row_bytes for r in range(lanes)]
    req = Request(0, 0, "shared", "load", None, "", [LaneAccess(0, t, (t, 0, 0), "smem", a, a, 16)
                                                       for t, a in enumerate(addrs)])
    phases = len(req.bank_phases())
    banks = [f"{(a // 4) % 32}-{(a // 4) % 32 + 3}" for a in addrs[:8]]
    steps = [f"16-byte reads go 8 lanes per phase: {lanes} lanes = {phases} phase{'s' if phases != 1 else ''}",
             f"lane r reads bytes {'swizzled ' if sw else ''}r*{row_bytes}"
             + (f" with Swizzle<{swizzle}>" if sw else "") + f": the first 8 lanes hit banks "
             f"{', '.join(banks)}",
             f"a phase takes as many wavefronts as the most distinct words one bank holds: {req.wavefronts} "
             f"wavefronts in all, {req.bank_conflicts} beyond one per phase"]
    given = {"last_row": lanes - 1, "pad_bytes": row_bytes - 128}
    if count == "conflicts":
        return Napkin(req.bank_conflicts, "bank conflicts", tuple(steps), given)
    return Napkin(req.wavefronts, "wavefronts", tuple(steps), given)


def accumulators_per_thread(M: int, N: int, threads: int) -> Napkin:  # noqa: N803
    """fp32 accumulator registers each thread holds for an MxN MMA tile spread over ``threads`` threads."""
    v = M * N / threads
    return Napkin(v, "registers", (f"{M}*{N} = {M * N} fp32 accumulators", f"over {threads} threads: {fmt(v)} each, "
                                   "one 32-bit register per accumulator"))


# ----------------------------------------------------------------------------------------------- communication


def comm_busbw(op: str, size_mb: float, ms: float, world: int) -> Napkin:
    """busbw (GB/s) nccl-tests reports for a collective of ``size_mb`` MB (1e6 B) taking ``ms`` on ``world`` ranks."""
    from workbench import comm_model

    f = comm_model.bus_factor(op, world)
    alg = comm_model.algbw(size_mb * 1e6, ms * 1e-3)
    return Napkin(alg * f, "GB/s", (f"algbw = S / t = {fmt(size_mb * 1e6)} B / {fmt(ms)} ms = {fmt(alg)} GB/s",
                                    f"{op}'s factor at n = {world}: {fmt(f)} (nccl-tests: 2(n-1)/n for all_reduce, "
                                    "(n-1)/n for reduce_scatter, all_gather, all_to_all)",
                                    f"busbw = {fmt(alg)} * {fmt(f)}"))


def grad_allreduce_time(params_b: float, dtype: str, world: int, link: str) -> Napkin:
    """Milliseconds of a ring all-reduce of a model's gradients on ``world`` GPUs (the alpha-beta model)."""
    from workbench import comm_model

    e = _elem(dtype)
    spec = hardware.get_link(link)
    m = comm_model.grad_sync_model(params_b, world, link, dtype_bytes=e)
    return Napkin(m.seconds * 1e3, "ms", (
        f"gradients: {params_b:g}e9 * {e} B = {fmt(m.nbytes)} B per GPU",
        f"ring: 2(n-1) = {m.steps} steps of S/n; each GPU sends 2(n-1)/n * S = {fmt(m.step_bytes)} B",
        f"at {fmt(spec.bandwidth_gbs)} GB/s per direction: {fmt(m.beta_s * 1e3)} ms",
        f"plus {m.steps} * {fmt(spec.latency_us)} us of step latency (assumed) = {fmt(m.alpha_s * 1e3)} ms"),
        {"link_name": spec.name, "bandwidth_gbs": fmt(spec.bandwidth_gbs)})


def tp_crossover(tp: int, device: str, link: str, dtype: str) -> Napkin:
    """Hidden size below which a TP MLP's all-reduce outlasts its down-projection GEMM (many tokens, peaks)."""
    from workbench import comm_model

    d, spec = _device(device), hardware.get_link(link)
    f = hardware.peak_tflops(d, dtype)
    h = comm_model.tp_crossover_hidden(tp, device, link, dtype=dtype)
    e = _elem(dtype)
    return Napkin(h, "features", (
        f"all-reduce of [T, h] in {dtype}: 2(tp-1)/tp * T*h*{e} B / {fmt(spec.bandwidth_gbs)} GB/s",
        f"down projection per GPU: 2 * T * (4h/tp) * h FLOPs / {fmt(f)} TFLOP/s",
        f"equal when h = (tp-1) * {e} * F / (4 * B) = {tp - 1} * {e} * {fmt(f)}e12 / "
        f"(4 * {fmt(spec.bandwidth_gbs)}e9)"),
        {"bf16_tflops": fmt(f), "device_name": d.name, "link_name": spec.name,
         "bandwidth_gbs": fmt(spec.bandwidth_gbs)})


FUNCTIONS = {f.__name__: f for f in (
    op_bytes, op_intensity, ridge, time_at_bandwidth, roofline_time, op_tflop, smem_per_stage, occupancy,
    blocks_per_sm, bank_conflict_ways, sectors_per_warp_load, waves, gemm_tile_intensity, kv_cache,
    attention_scores_bytes, weights_read_time, padded_rows_bound, block_scale_overhead, splitk_workspace,
    fp8_gemm_speedup, softmax_passes_time, e4m3_step_at, kv_bytes_per_token, kv_tokens_fit, splits_to_fill,
    fusion_bytes_saved, layout_offset, smem_column_read, accumulators_per_thread,
    comm_busbw, grad_allreduce_time, tp_crossover)}
