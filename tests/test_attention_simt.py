"""attention, Numba and CUDA C variants: naive and flash Numba, SIMT, wmma and mma.sync FlashAttention against the
float64 reference (causal, Sq != Sk, ragged tiles and head dims), head-dim refusals, the tensor-core kernels' SASS,
and the GPU-only mma.sync kernel's logic on the CPU engine with its inline PTX emulated."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import workbench as wb
from tests._ops import variant_report
from tests.conftest import CPU_MODE, cuda_engine_ready, inline_headers

NAMES = ("numba_naive", "numba_flash", "cuda_flash_simt", "cuda_flash_wmma", "cuda_flash_mma")
HALF_ONLY = ("cuda_flash_wmma", "cuda_flash_mma")


def _shape(b: int, h: int, sq: int, sk: int, d: int, causal: bool, **kw: float) -> dict:
    return {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d, "causal": causal, **kw}


def _skip_cuda(v: wb.Variant) -> None:
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())


def test_registered_in_teaching_order():
    names = [v.name for v in wb.variants("attention")]
    assert [n for n in names if n in NAMES] == list(NAMES)
    assert names.index("torch_sdpa") < names.index("numba_naive")
    for name in ("cuda_flash_simt", "cuda_flash_wmma"):
        v = wb.variant("attention", name)
        assert v.cu_file is not None and v.cu_file.exists()
        assert v.inspect_spec is not None and v.inspect_spec()["kind"] == "cuda"
    for name in HALF_ONLY:
        assert wb.variant("attention", name).dtypes == (torch.float16, torch.bfloat16)
    assert wb.variant("attention", "cuda_flash_mma").gpu_only


@pytest.mark.parametrize("name", NAMES)
def test_variant_is_checked_in_its_dtypes_causal_and_with_sq_not_sk(name):
    """tests/test_ops.py requires the report to pass (sizes in tests/_ops.py: a few rows for the Numba simulator;
    the op's shapes plus several key tiles, padded head dims and explicit scales for CUDA C); here: what it covers."""
    v = wb.variant("attention", name)
    if not v.runs_here():
        pytest.skip(v.why_not_here())
    _skip_cuda(v)
    rep = variant_report("attention", name)
    assert not rep.skipped, rep.skipped
    dts = {c.dtype for c in rep.cases}
    want = {"float16", "bfloat16"} if name in HALF_ONLY else {"float32", "float16"}
    if v.backend == "cuda" and name not in HALF_ONLY:
        want.add("bfloat16")
    assert want <= dts, f"{name} was not checked in {want - dts}"
    shapes = [c.shape for c in rep.cases]
    assert any(s["causal"] for s in shapes) and any(s["Sq"] != s["Sk"] for s in shapes)


@pytest.mark.parametrize("name", ["numba_flash", "cuda_flash_simt", "cuda_flash_wmma"])
def test_empty_key_and_query_sets(name):
    v = wb.variant("attention", name)
    _skip_cuda(v)
    dt = "float16" if name != "numba_flash" else "float32"
    rep = wb.check(v, shapes=[_shape(1, 1, 3, 0, 16, False), _shape(1, 1, 0, 3, 16, True)], dtypes=(dt,), seeds=(0,))
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("name", ["numba_flash", "cuda_flash_simt", "cuda_flash_wmma", "cuda_flash_mma"])
def test_unsupported_head_dim_is_refused_naming_the_supported_set(name):
    v = wb.variant("attention", name)
    why = v.supports(_shape(1, 1, 4, 4, 160, False))
    assert why and name in why and "D <= 128" in why and "160" in why
    assert v.supports(_shape(1, 1, 4, 4, 100, False)) is None  # padded, not refused
    q = torch.zeros(1, 1, 2, 160, dtype=torch.float16, device=wb.device())
    with pytest.raises(wb.UnsupportedHere, match="D <= 128" if v.runs_here() else "GPU-only"):
        v(q, q, q)
    if v.backend == "cuda":  # the launcher itself refuses too, as an OpError, when called around the registry
        with pytest.raises(wb.OpError, match=r"attention: .*D <= 128 \(padded to 16, 32, 64, 128\)"):
            v.fn(q, q, q)


def test_wmma_refuses_fp32_and_numba_refuses_long_score_rows():
    why = wb.variant("attention", "cuda_flash_wmma").why_not_here("float32")
    assert why and "float16" in why and "bfloat16" in why
    why = wb.variant("attention", "numba_naive").why_not_here("float32", _shape(1, 1, 1, 9000, 16, False))
    assert why and "Sk <= 8192" in why and "numba_flash" not in why


@pytest.mark.skipif(not CPU_MODE, reason="cpu-mode limits")
@pytest.mark.parametrize("name", ["numba_naive", "numba_flash"])
def test_numba_cpu_limits_say_why(name):
    why = wb.variant("attention", name).why_not_here("float32", _shape(4, 16, 1024, 1024, 128, False))
    assert why and "simulator" in why and "GPU" in why


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("name,must", [("cuda_flash_wmma", ["HMMA"]),
                                       ("cuda_flash_mma", ["HMMA", "LDSM (ldmatrix)", "LDGSTS (cp.async)"])])
def test_tensor_core_kernels_through_wb_inspect(name, must):
    r = wb.inspect(wb.variant("attention", name), arch="sm_90")
    assert r.registers > 0 and r.spill_stores == 0
    missing = [m for m in must if not r.instruction_mix.get(m)]
    assert not missing, f"{name}: the sm_90 SASS has no {missing}"


# C++ stand-ins for attn_flash_mma.cu's PTX helpers, built from warp shuffles after the PTX ISA's fragment layouts
# (m16n8k16 .row.col: a lane l = 4g + t holds A rows g, g+8 and B column g at k = 2t, 2t+1, 2t+8, 2t+9; C/D rows g,
# g+8, columns 2t, 2t+1; ldmatrix: lane l supplies the row address of matrix l/8 and receives row l/4, elements
# 2(l%4), 2(l%4)+1). cp.async becomes a synchronous copy. The gemm's mma.sync kernel passes with them too, which
# checks the stand-ins against a kernel written independently.
PTX_EMULATION = r"""
#include <stdint.h>
#include <string.h>
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  memcpy(dst, src, src_bytes);
  memset((char*)dst + src_bytes, 0, 16 - src_bytes);
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N> __device__ __forceinline__ void cp_async_wait() {}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  int lane = threadIdx.x % 32;
  unsigned long long addr = (unsigned long long)p;
  for (int mi = 0; mi < 4; ++mi) {
    unsigned long long row = __shfl_sync(0xffffffffu, addr, mi * 8 + lane / 4);
    memcpy(&r[mi], (const char*)row + (lane % 4) * 4, 4);
  }
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  int lane = threadIdx.x % 32;
  unsigned long long addr = (unsigned long long)p;
  for (int mi = 0; mi < 4; ++mi) {
    unsigned long long ra = __shfl_sync(0xffffffffu, addr, mi * 8 + 2 * (lane % 4));
    unsigned long long rb = __shfl_sync(0xffffffffu, addr, mi * 8 + 2 * (lane % 4) + 1);
    uint16_t lo, hi;
    memcpy(&lo, (const char*)ra + (lane / 4) * 2, 2);
    memcpy(&hi, (const char*)rb + (lane / 4) * 2, 2);
    r[mi] = (unsigned)lo | ((unsigned)hi << 16);
  }
}
template <typename T> __device__ __forceinline__ float emu_h(unsigned u, int e) {
  uint16_t b = (uint16_t)(e ? (u >> 16) : (u & 0xffffu));
  T x;
  memcpy(&x, &b, 2);
  return (float)x;
}
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int tp = 0; tp < 4; ++tp) {  // k = 2tp + e (registers 0, 1 of A, b0) and 8 + 2tp + e (registers 2, 3, b1)
    unsigned A[4], Bc0[2], Bc1[2];
    for (int r = 0; r < 4; ++r) A[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + tp);
    Bc0[0] = __shfl_sync(0xffffffffu, b0, 8 * t + tp);
    Bc0[1] = __shfl_sync(0xffffffffu, b1, 8 * t + tp);
    Bc1[0] = __shfl_sync(0xffffffffu, b0, 8 * t + 4 + tp);
    Bc1[1] = __shfl_sync(0xffffffffu, b1, 8 * t + 4 + tp);
    for (int hk = 0; hk < 2; ++hk)
      for (int e = 0; e < 2; ++e) {
        float ag = emu_h<T>(A[2 * hk], e), ag8 = emu_h<T>(A[2 * hk + 1], e);
        float b_0 = emu_h<T>(Bc0[hk], e), b_1 = emu_h<T>(Bc1[hk], e);
        d[0] += ag * b_0;
        d[1] += ag * b_1;
        d[2] += ag8 * b_0;
        d[3] += ag8 * b_1;
      }
  }
}
"""


def _emulated(path: Path) -> str:
    """Return the source of ``path`` with its local headers inlined and ``mma_ptx.cuh`` emulated."""
    return inline_headers(path, {"mma_ptx.cuh": PTX_EMULATION})


@pytest.mark.skipif(not CPU_MODE, reason="on a GPU the real kernel runs in test_variant_passes_checker")
def test_mma_sync_kernel_logic_with_emulated_ptx():
    if cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    from workbench import cuda
    from workbench.interop import to_raw

    root = Path(__file__).resolve().parent.parent
    # frontend=False: the PTX emulation is CPU-only C++ (<stdint.h>); test_nvrtc compiles the real files
    gmod = cuda.RawModule(_emulated(root / "kernels" / "gemm" / "cu" / "hgemm_mma_sync.cu"), frontend=False)
    amod = cuda.RawModule(_emulated(root / "kernels" / "attention" / "attn_flash_mma.cu"), frontend=False)
    suffix = {torch.float16: "f16", torch.bfloat16: "bf16"}

    def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = wb.empty((m, n), a.dtype)
        fn = gmod.get_function(f"hgemm_mma_sync_{suffix[a.dtype]}")
        fn.max_dynamic_shared_size_bytes = smem = 58368
        fn(((n + 127) // 128, (m + 127) // 128), (256,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n),
                                                           np.int32(k), np.int32(k % 8 == 0 and n % 8 == 0)),
           shared_mem=smem)
        return c

    # probes=False: this checks the PTX stand-ins on chosen shapes (the kernels' own probes run on a GPU, where they
    # are variants); time_limit: an emulated mma block takes ~10 ms, and a loaded CI machine is slower still.
    rep = wb.check(gemm, "gemm", shapes=[{"M": 130, "N": 72, "K": 48}], dtypes=("float16",), seeds=(0,),
                   probes=False, time_limit=600)
    assert rep.ok, "the PTX stand-ins disagree with the gemm mma.sync kernel: " + rep.summary()

    def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
             scale: float | None = None) -> torch.Tensor:
        b, h, sq, d = q.shape
        out = wb.empty_like(q)
        hd = next(x for x in (16, 32, 64, 128) if d <= x)
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        fn = amod.get_function(f"attn_flash_mma_d{hd}_{suffix[q.dtype]}")
        fn(((sq + 63) // 64, b * h), (128,), (to_raw(q), to_raw(k), to_raw(v), to_raw(out), np.int32(sq),
                                              np.int32(k.shape[2]), np.int32(d), np.float32(scale * math.log2(math.e)),
                                              np.int32(causal), np.int32(d % 8 == 0)))
        return out

    # Three key tiles with Sq < Sk, causal with Sq > Sk and a padded D without cp.async (D % 8 != 0), D = 128.
    # (Each emulated mma is 32 warp shuffles per lane: ~10 ms per block; these take ~5 s.)
    for shapes, dt in [([_shape(1, 1, 65, 130, 64, True)], "float16"), ([_shape(1, 1, 130, 70, 17, True, scale=2.0)],
                        "bfloat16"), ([_shape(1, 1, 17, 33, 128, False)], "float16")]:
        rep = wb.check(attn, "attention", shapes=shapes, dtypes=(dt,), seeds=(0,), probes=False, time_limit=600)
        assert rep.ok, rep.summary()
