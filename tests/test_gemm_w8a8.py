"""gemm_w8a8: the contract against an exact integer sum, the quantizers, bad inputs, empty problems, the known-wrong
kernel's diagnosis, the error table, the sm_90 compiles, and the int8 tl.dot the interpreter runs.

The variants' own checker runs are tests/test_ops.py's (``variant_reports`` / ``wrong_report``, shared): this file
reads the same reports instead of running them again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import workbench as wb
from kernels.gemm_w8a8 import reference as R
from tests._ops import variant_reports, wrong_report
from tests.conftest import inline_headers

OP = "gemm_w8a8"


def _inputs(M=9, N=21, K=37, seed=0):
    return wb.make_inputs(OP, M=M, N=N, K=K, dtype="bfloat16", seed=seed)


def _exact(a, b, sa, sb):
    """c[m, n] = sa[m] * sb[n] * sum_k a[m, k] * b[n, k], the sum in int64 (exact), the scales in float64."""
    acc = (a.long()[:, None, :] * b.long()[None, :, :]).sum(-1)
    return acc.double() * sa.double()[:, None] * sb.double()[None, :]


# ------------------------------------------------------------------------------------------------ contract
@pytest.mark.parametrize("shape", [(9, 21, 37), (3, 5, 1), (4, 3, 4099)])
def test_reference_is_the_exact_integer_sum_scaled_once(shape):
    a, b, sa, sb = _inputs(*shape)
    m, n, k = shape
    assert a.dtype == b.dtype == torch.int8 and sa.dtype == sb.dtype == torch.float32
    assert tuple(sa.shape) == (m,) and tuple(sb.shape) == (n,)
    ref = wb.reference(OP)(a, b, sa, sb)
    assert ref.dtype == torch.float64 and ref.shape == (m, n)
    assert torch.equal(ref, _exact(a, b, sa, sb))


def test_quantizers_are_symmetric_absmax_per_row():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 40, generator=g)
    x[2] = 0.0  # an all-zero row: zero codes, a tiny positive scale
    x[3, 7] = 50.0  # an outlier token: its own scale, the other rows untouched
    q, s = R.quantize_per_token(x)
    assert q.dtype == torch.int8 and s.dtype == torch.float32 and tuple(s.shape) == (5,)
    assert torch.equal(q[2], torch.zeros(40, dtype=torch.int8)) and 0 < s[2].item() < 1e-12
    for r in (0, 1, 3, 4):  # the row's amax lands on +-127 and the scale is amax / 127
        assert q[r].abs().max().item() == 127
        assert s[r].item() == pytest.approx(x[r].abs().max().item() / 127, rel=1e-6)
    # round to nearest: the dequantized value is within half a step of x
    assert ((R.dequantize(q, s) - x.double()).abs() <= s.double()[:, None] / 2 + 1e-9).all()
    assert s[3].item() == pytest.approx(50 / 127) and s[4].item() < 0.05
    qb, sb = R.quantize_per_channel(x.T.contiguous())  # a weight [N, K]: one scale per output channel (row)
    assert tuple(sb.shape) == (40,) and qb.abs().amax(dim=1).min().item() == 127
    assert q.min().item() >= -127  # -128 is never used: the range stays symmetric


def test_torch_baseline_and_ladder():
    assert [v.name for v in wb.variants(OP)] == ["torch_int_mm", "triton_int8", "cuda_dp4a", "cuda_mma"]
    assert wb.variant(OP, "cuda_mma").gpu_only
    assert [v.name for v in wb.known_wrong(OP)] == ["wrong_scale_first"]
    assert wb.get_op(OP).dtypes == (torch.bfloat16,)
    a, b, sa, sb = _inputs(5, 7, 300)
    out = wb.variant(OP, "torch_int_mm")(a, b, sa, sb)
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.double(), _exact(a, b, sa, sb), rtol=4e-3, atol=1e-3)
    for m, n in ((1, 2), (2, 33)):  # K = 1, where torch's CPU _int_mm returns garbage: the baseline goes around it
        a, b, sa, sb = _inputs(m, n, 1)
        out = wb.variant(OP, "torch_int_mm")(a, b, sa, sb)
        assert torch.allclose(out.double(), _exact(a, b, sa, sb), rtol=4e-3, atol=1e-3)


BAD = [
    (lambda a, b, sa, sb: (a.to(torch.uint8), b, sa, sb), r"gemm_w8a8: input a\[M,K\].*int8"),
    (lambda a, b, sa, sb: (a, b.float(), sa, sb), r"gemm_w8a8: input b\[N,K\].*int8"),
    (lambda a, b, sa, sb: (a, b[:, :-1].contiguous(), sa, sb), r"gemm_w8a8: a\[M,K\] and b\[N,K\] must share K"),
    (lambda a, b, sa, sb: (a, b, sa.double(), sb), r"gemm_w8a8: input scale_a\[M\].*float32"),
    (lambda a, b, sa, sb: (a, b, sa, sb[:-1].contiguous()),
     r"gemm_w8a8: scale_b must hold one scale per row \(output channel\) of b, \[N\] = \[21\], got \[20\]"),
    (lambda a, b, sa, sb: (a, b, sa[:1].contiguous(), sb),
     r"gemm_w8a8: scale_a must hold one scale per row \(token\) of a, \[M\] = \[9\], got \[1\]"),
    (lambda a, b, sa, sb: (a, b, sa[None], sb), r"gemm_w8a8: input scale_a.* must be 1-D"),
]


@pytest.mark.parametrize("mutate,match", BAD)
def test_bad_inputs_name_the_op_and_what_was_expected(mutate, match):
    args = mutate(*_inputs())
    for name in ("torch_int_mm", "triton_int8", "cuda_dp4a"):
        with pytest.raises(wb.OpError, match=match):
            wb.variant(OP, name)(*args)
    with pytest.raises(wb.OpError, match=match):
        wb.reference(OP)(*args)


@pytest.mark.parametrize("shape", [(0, 5, 8), (6, 0, 8), (6, 5, 0)])
def test_empty_problems(shape):
    inputs = _inputs(*shape)
    ref = wb.reference(OP)(*inputs)
    for name in ("torch_int_mm", "triton_int8", "cuda_dp4a"):
        out = wb.variant(OP, name)(*inputs)
        assert out.shape == ref.shape and out.dtype == torch.bfloat16
        assert torch.equal(out.double(), ref), name  # zeros for K = 0


# ------------------------------------------------------------------------------------------------ kernels
@pytest.mark.parametrize("name", ["triton_int8", "cuda_dp4a"])
def test_kernels_pass_at_ragged_k(name):
    reps = variant_reports(OP, name)
    assert reps and all(r.ok for r in reps), [r.summary() for r in reps]
    ks = {c.shape["K"] for r in reps for c in r.runs}
    assert {1, 9, 131} <= ks  # K below 4, not a multiple of 4 (dp4a's packed words), past one 32-wide tile


def test_kernels_match_the_baseline_bit_for_bit_at_long_ragged_k():
    # K = 4099: dp4a packs the last, 3-byte word from byte loads (vec = 0); K = 4096: one 4-byte load per word
    # (vec = 1). Sums past 2^24 round when converted to fp32, so the epilogue's arithmetic shows: every kernel does
    # float(acc) * scale_a[m] * scale_b[n] in fp32, then one rounding to bf16, as the baseline does.
    for k in (4099, 4096):
        a, b, sa, sb = _inputs(3, 35, k, seed=2)
        base = wb.variant(OP, "torch_int_mm")(a, b, sa, sb)
        assert torch.allclose(base.double(), _exact(a, b, sa, sb), rtol=4e-3, atol=0)
        for name in ("triton_int8", "cuda_dp4a"):
            assert torch.equal(wb.variant(OP, name)(a, b, sa, sb), base), (name, k)


def test_wrong_kernel_is_fine_at_small_k_and_drifts_past_it():
    rep = wrong_report(OP, "wrong_scale_first")
    assert rep.diagnosis == "precision", rep.summary()
    by_k = {c.shape["K"]: c.ok for c in rep.runs}
    assert by_k[1] and by_k[9] and not by_k[64], by_k  # one rounding per addition: the error grows with K


def test_engine_dp4a_is_four_signed_byte_products():
    src = r'''
    extern "C" __global__ void k(const int* x, const int* y, int* out) {
      out[threadIdx.x] = __dp4a(x[threadIdx.x], y[threadIdx.x], 5);
      out[4 + threadIdx.x] = (int)__dp4a((unsigned)x[threadIdx.x], (unsigned)y[threadIdx.x], 5u);
    }'''
    import numpy as np

    g = torch.Generator().manual_seed(0)
    xb = torch.randint(-128, 128, (4, 4), generator=g, dtype=torch.int8)
    yb = torch.randint(-128, 128, (4, 4), generator=g, dtype=torch.int8)
    x, y = xb.view(torch.int32).reshape(4), yb.view(torch.int32).reshape(4)
    out = np.zeros(8, dtype=np.int32)
    wb.cuda.RawKernel(src, "k")((1,), (4,), (x.numpy(), y.numpy(), out))
    signed = (xb.long() * yb.long()).sum(1) + 5
    unsigned = (xb.view(torch.uint8).long() * yb.view(torch.uint8).long()).sum(1) + 5
    assert out[:4].tolist() == signed.tolist() and out[4:].tolist() == unsigned.tolist()


# A C++ stand-in for cu/w8a8_mma_ptx.cuh's mma.sync m16n8k32 (the CPU engine cannot run inline PTX), built from
# warp shuffles after the PTX ISA's fragment layout: lane l = 4g + t holds A rows g and g + 8 at k = 4t .. 4t + 3
# (registers 0, 1) and 16 + 4t .. (2, 3), B column g at the same k (b0, b1), and C[g][2t], C[g][2t + 1],
# C[g + 8][2t], C[g + 8][2t + 1]. Each lane gathers the words its four outputs need and sums them with __dp4a.
MMA_STAND_IN = r"""
__device__ __forceinline__ void mma_s8_16832(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int tp = 0; tp < 4; ++tp) {  // lane tp of a group of 4 holds k = 4tp .. 4tp + 3 and 16 + 4tp .. 16 + 4tp + 3
    unsigned A[4];
    for (int r = 0; r < 4; ++r) A[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + tp);
    const unsigned c0 = __shfl_sync(0xffffffffu, b0, 8 * t + tp), c0h = __shfl_sync(0xffffffffu, b1, 8 * t + tp);
    const unsigned c1 = __shfl_sync(0xffffffffu, b0, 8 * t + 4 + tp);
    const unsigned c1h = __shfl_sync(0xffffffffu, b1, 8 * t + 4 + tp);
    d[0] = __dp4a((int)A[2], (int)c0h, __dp4a((int)A[0], (int)c0, d[0]));
    d[1] = __dp4a((int)A[2], (int)c1h, __dp4a((int)A[0], (int)c1, d[1]));
    d[2] = __dp4a((int)A[3], (int)c0h, __dp4a((int)A[1], (int)c0, d[2]));
    d[3] = __dp4a((int)A[3], (int)c1h, __dp4a((int)A[1], (int)c1, d[3]));
  }
}
"""


def _with_stand_in(path: Path) -> str:
    """Return ``path``'s source with its local headers inlined and the mma.sync swapped for the stand-in."""
    return inline_headers(path, {"w8a8_mma_ptx.cuh": MMA_STAND_IN})


def test_mma_kernel_logic_with_a_stand_in_for_the_instruction():
    if wb.MODE == "gpu":
        pytest.skip("on a GPU the real kernel runs in tests/test_ops.py")
    from kernels.gemm_w8a8 import v3_cuda_mma
    from workbench.interop import to_raw

    mod = wb.cuda.RawModule(_with_stand_in(v3_cuda_mma.CU_PATH), frontend=False)  # CPU-only C++ (no PTX)
    kernel = mod.get_function("w8a8_mma")

    def mma_gemm(a, b, sa, sb):
        m, k = a.shape
        n = b.shape[0]
        c = wb.empty((m, n), torch.bfloat16)
        if c.numel():
            vec = int(k % 4 == 0)
            kernel(((n + 63) // 64, (m + 63) // 64), (128,), (to_raw(a), to_raw(b), to_raw(sa), to_raw(sb), to_raw(c),
                                                               np.int32(m), np.int32(n), np.int32(k), np.int32(vec)))
        return c

    # 2 x 2 blocks with ragged edges and K = 37 (a partial word, vec = 0); one full block with K = 64 (vec = 1)
    rep = wb.check(mma_gemm, OP, shapes=[{"M": 70, "N": 67, "K": 37}, {"M": 64, "N": 64, "K": 64}], seeds=(0,),
                   probes=False)
    assert rep.ok, rep.summary()
    a, b, sa, sb = _inputs(70, 67, 37)
    assert torch.equal(mma_gemm(a, b, sa, sb), wb.variant(OP, "torch_int_mm")(a, b, sa, sb))


def test_sm90_compiles_use_int8_tensor_cores_and_dp4a():
    r = wb.inspect(wb.variant(OP, "triton_int8"), arch="sm_90")
    assert "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8" in r.ptx or ".s32.s8.s8" in r.ptx, r.ptx[:2000]
    assert "IGMMA" in r.sass and r.spill_stores == 0, r.ptxas_log
    r = wb.inspect(wb.variant(OP, "cuda_dp4a"), arch="sm_90")
    assert "dp4a.s32.s32" in r.ptx and "IDP.4A.S8.S8" in r.sass
    r = wb.inspect(wb.variant(OP, "cuda_mma"), arch="sm_90")
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in r.ptx and r.sass.count("IMMA.16832.S8.S8") == 8
    assert r.spill_stores == 0, r.ptxas_log


# ------------------------------------------------------------------------------------------------ error table
def test_error_table_orders_the_formats():
    rows = {r["method"]: r for r in R.error_table(M=16, N=16, K=256, seed=0)}
    assert set(rows) == {"bf16", "fp8 e4m3, per-tensor scales", "fp8 e4m3, per-token/per-channel scales",
                         "int8 w8a8, per-token/per-channel scales"}
    err = {k: v["rel_error"] for k, v in rows.items()}
    assert all(0 < e < 0.1 for e in err.values()) and all(r["max_abs_error"] > 0 for r in rows.values())
    # bf16 (8 significant bits, the output's rounding) beats int8 (~7 bits at a row's amax, fewer below), which
    # beats e4m3 (4 significant bits)
    assert err["bf16"] < err["int8 w8a8, per-token/per-channel scales"] < err["fp8 e4m3, per-token/per-channel scales"]


def test_error_table_outlier_channels_hurt_int8_more_than_fp8():
    # A few activation channels 20x larger: every token's amax (and so its step) is set by the outliers, and the
    # uniform int8 grid loses the small values; e4m3's relative steps keep them.
    plain = {r["method"]: r["rel_error"] for r in R.error_table(M=16, N=16, K=256, seed=0)}
    out = {r["method"]: r["rel_error"] for r in R.error_table(M=16, N=16, K=256, seed=0, outliers=4)}
    i8, f8 = "int8 w8a8, per-token/per-channel scales", "fp8 e4m3, per-token/per-channel scales"
    assert out[i8] / plain[i8] > out[f8] / plain[f8]
