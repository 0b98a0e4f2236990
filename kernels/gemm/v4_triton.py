"""GEMM in Triton: a basic tile, grouped (L2-friendly) program order, autotuned configs, and a persistent
TMA kernel for Hopper.

Every kernel accumulates in fp32 and casts once on the store. fp32 inputs use ``input_precision="ieee"`` (a
true fp32 dot; the GPU default would be TF32, 10-bit mantissa), 16-bit inputs go to the tensor cores.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import dot_precision, triton_spec, tuned
from kernels._triton_tiles import grouped_tile
from kernels.gemm.reference import output, tma_supports
from workbench import register


# -------------------------------------------------------------------------------------------------------- triton_tile
@triton.jit
def tile_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                PRECISION: tl.constexpr):
    # Program (pid_m, pid_n) computes the BM x BN tile of c; the K loop walks BK-wide slices of a and b.
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


TILE = {"BM": 64, "BN": 64, "BK": 32}  # 64x64 tile: 8 KiB of fp16 operands per K step, 4 warps


def _tile_spec() -> dict:
    return triton_spec(tile_kernel, torch.float16, **TILE, PRECISION="tf32", num_warps=4, num_stages=2)


@register("gemm", "triton_tile", backend="triton", inspect_spec=_tile_spec,
          idea="One program per 64x64 tile of c, a K loop of masked tile loads and tl.dot into an fp32 accumulator.")
def triton_tile(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    grid = (triton.cdiv(m, TILE["BM"]), triton.cdiv(n, TILE["BN"]))
    tile_kernel[grid](a, b, c, m, n, k, **TILE, PRECISION=dot_precision(a.dtype), num_warps=4, num_stages=2)
    return c


# ----------------------------------------------------------------------------------------------------- triton_grouped
@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # A 1-D grid walked in groups of GROUP_M tile-rows: consecutive programs (which run at the same time) go
    # down a column of GROUP_M tiles before moving right, so they share GROUP_M row-panels of a and one column
    # panel of b in L2. Row-major order would stream a whole row of b panels through L2 for every tile-row.
    pid = tl.program_id(0)
    n_m = (M + BM - 1) // BM
    n_n = (N + BN - 1) // BN
    per_group = GROUP_M * n_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_m = tl.minimum(n_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k0) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _grouped_cfg(dtype: torch.dtype) -> dict:
    # 128x128 tile; BK 64 for 16-bit (3 stages x 32 KiB = 96 KiB of shared memory), 32 for fp32 (same bytes).
    return {"BM": 128, "BN": 128, "BK": 32 if dtype == torch.float32 else 64, "GROUP_M": 8}


def _grouped_spec() -> dict:
    return triton_spec(grouped_kernel, torch.float16, **_grouped_cfg(torch.float16), PRECISION="tf32", num_warps=8,
                       num_stages=3)


@register("gemm", "triton_grouped", backend="triton", inspect_spec=_grouped_spec,
          idea="128x128 tiles launched in groups of 8 tile-rows so programs running together share L2.")
def triton_grouped(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    cfg = _grouped_cfg(a.dtype)
    grid = (triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"]),)
    grouped_kernel[grid](a, b, c, m, n, k, **cfg, PRECISION=dot_precision(a.dtype), num_warps=8, num_stages=3)
    return c


# --------------------------------------------------------------------------------------------------- triton_autotuned
def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_stages=stages, num_warps=warps)


# Hopper-sized candidates (16-bit shared memory per stage: (BM + BN) * BK * 2 B; 128x256x64 -> 48 KiB x 3).
# 128x256x64 / 3 stages / 8 warps is what Triton's matmul tutorial finds best for bf16 at 8192^3 on H100.
CONFIGS = [
    _cfg(128, 256, 64, 3, 8),
    _cfg(256, 128, 64, 3, 8),
    _cfg(128, 128, 64, 4, 4),
    _cfg(128, 128, 64, 4, 8),
    _cfg(128, 64, 64, 4, 4),
    _cfg(64, 128, 64, 4, 4),
    _cfg(128, 128, 32, 4, 4),  # fits fp32: (128 + 128) * 32 * 4 B = 32 KiB per stage
    _cfg(64, 64, 32, 4, 4),
]
# On a GPU the autotuner times every config once per (M, N, K, dtype) and keeps the fastest. In cpu mode the
# interpreter's times say nothing about a GPU, so it runs one fixed config instead of tuning.
CPU_CONFIG = _cfg(64, 64, 32, 1, 4)
_tuned = tuned(grouped_kernel, CONFIGS, cpu_config=CPU_CONFIG, key=["M", "N", "K"])


def _autotuned_spec() -> dict:
    return {**_grouped_spec(), "constexprs": {**CONFIGS[0].kwargs, "PRECISION": "tf32"}, "num_warps": 8,
            "num_stages": 3}


@register("gemm", "triton_autotuned", backend="triton", inspect_spec=_autotuned_spec,
          idea="The grouped kernel autotuned over 8 tile/stage/warp configs per (M, N, K, dtype) on a GPU.")
def triton_autotuned(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    _tuned[lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)](
        a, b, c, m, n, k, PRECISION=dot_precision(a.dtype))
    return c


# ------------------------------------------------------------------------------------- triton_persistent_tma (Hopper)
@triton.jit
def persistent_tma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    # One program per SM loops over tiles (no launch tail, no per-tile launch cost). Tensor descriptors make
    # every tile load a TMA copy (one thread issues a bulk global->shared transfer; out-of-bounds reads give 0),
    # which frees registers and warps for wgmma. Descriptors built on the device need a scratch allocator.
    start = tl.program_id(0)
    n_m = (M + BM - 1) // BM
    n_n = (N + BN - 1) // BN
    n_k = (K + BK - 1) // BK
    num_tiles = n_m * n_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, n_m, n_n, GROUP_M)  # triton_grouped's order, from the shared helper
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(n_k):
            a = a_desc.load([pid_m * BM, kk * BK])
            b = b_desc.load([kk * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))


PERSISTENT = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}  # 3 stages x 48 KiB of bf16 operands


def _persistent_spec() -> dict:
    return triton_spec(persistent_tma_kernel, torch.bfloat16, **PERSISTENT, NUM_SMS=132, num_warps=8, num_stages=3)


_allocator_set = False


def _ensure_allocator() -> None:
    global _allocator_set
    if not _allocator_set:
        def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
            return torch.empty(size, device="cuda", dtype=torch.int8)  # 128 B per descriptor

        triton.set_allocator(alloc)
        _allocator_set = True


@register("gemm", "triton_persistent_tma", backend="triton", gpu_only=True, dtypes=("float16", "bfloat16"),
          supports=tma_supports, inspect_spec=_persistent_spec,
          gpu_note="TMA tensor descriptors and wgmma need Hopper (sm_90)",
          idea="Persistent: one program per SM loops over grouped tiles; TMA descriptors load 128x64/64x256 tiles.")
def triton_persistent_tma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _ensure_allocator()
    c, m, n, k = output(a, b)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(m, PERSISTENT["BM"]) * triton.cdiv(n, PERSISTENT["BN"])
    persistent_tma_kernel[(min(sms, tiles),)](a, b, c, m, n, k, **PERSISTENT, NUM_SMS=sms, num_warps=8,
                                               num_stages=3)
    return c
