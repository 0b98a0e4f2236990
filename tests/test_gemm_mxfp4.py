"""gemm_mxfp4: the OCP MXFP4 contract (packing, e2m1 and e8m0 decoding) against a decoder written from the spec,
the quantizer and its block scales, bad inputs, empty problems, the Triton decode helpers, the refusal of
tl.dot_scaled in cpu mode, and its compiles for sm_90 (emulated) and sm_100 (native).

The variants' own checker runs are tests/test_ops.py's (``variant_reports``, shared): this file reads them.
"""

from __future__ import annotations

import math

import pytest
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels.gemm_mxfp4 import reference as R
from kernels.gemm_mxfp4.v1_triton_decode import e2m1_to_f16, e8m0_to_f32
from tests._ops import variant_reports

OP = "gemm_mxfp4"


def _inputs(M=5, N=7, K=64, seed=0):
    return wb.make_inputs(OP, M=M, N=N, K=K, dtype="bfloat16", seed=seed)


def _e2m1(code: int) -> float:
    """The value of a 4-bit e2m1 code, from the format: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0."""
    sign = -1.0 if code & 8 else 1.0
    e, m = (code >> 1) & 3, code & 1
    return sign * (m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1))


def _decode_by_hand(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, nbytes = packed.shape
    out = torch.empty(rows, 2 * nbytes, dtype=torch.float64)
    for r in range(rows):
        for j in range(nbytes):
            byte = int(packed[r, j])
            for half, code in enumerate((byte & 15, byte >> 4)):  # the low nibble is element 2j
                k = 2 * j + half
                out[r, k] = _e2m1(code) * 2.0 ** (int(scale[r, k // 32]) - 127)
    return out


# ------------------------------------------------------------------------------------------------ contract
def test_e2m1_magnitudes_and_nibble_order():
    assert [_e2m1(c) for c in range(8)] == list(R.E2M1) and [_e2m1(c) for c in range(8, 16)] == [-v for v in R.E2M1]
    # byte 0x7A: low nibble 0xA (-1.0) is element 0, high nibble 0x7 (6.0) element 1
    assert R.decode_e2m1(torch.tensor([[0x7A, 0x01]], dtype=torch.uint8)).tolist() == [[-1.0, 6.0, 0.5, 0.0]]
    s = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    v = R.decode_e8m0(s)
    assert v[:6].tolist() == [2.0 ** -127, 2.0 ** -126, 0.5, 1.0, 2.0, 2.0 ** 127] and math.isnan(v[6])


@pytest.mark.parametrize("shape", [(5, 7, 64), (2, 3, 96)])
def test_reference_decodes_as_the_spec_says(shape):
    a, sa, b, sb = _inputs(*shape)
    m, n, k = shape
    assert a.dtype == b.dtype == sa.dtype == sb.dtype == torch.uint8
    assert tuple(a.shape) == (m, k // 2) and tuple(sa.shape) == (m, k // 32) and tuple(sb.shape) == (n, k // 32)
    ref = wb.reference(OP)(a, sa, b, sb)
    assert ref.dtype == torch.float64 and ref.shape == (m, n)
    assert torch.equal(ref, _decode_by_hand(a, sa) @ _decode_by_hand(b, sb).T)


def test_a_nan_scale_makes_its_rows_outputs_nan():
    a, sa, b, sb = _inputs(3, 4, 64)
    sa = sa.clone()
    sa[1, 1] = 255
    ref = wb.reference(OP)(a, sa, b, sb)
    assert ref[1].isnan().all() and not ref[[0, 2]].isnan().any()


def test_quantizer_follows_the_ocp_recipe():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 96, generator=g) * torch.tensor([[1.0], [1e-3], [300.0]])
    x[0, 32:64] = 0.0  # an all-zero block
    packed, s = R.quantize_mxfp4(x)
    assert packed.dtype == s.dtype == torch.uint8 and tuple(packed.shape) == (3, 48) and tuple(s.shape) == (3, 3)
    blocks = x.double().reshape(3, 3, 32)
    amax = blocks.abs().amax(-1)
    e = s.long() - 127
    assert torch.equal(R.block_scales(x), e) and e[0, 1].item() == -127
    live = amax > 0
    assert torch.equal(e[live], torch.floor(torch.log2(amax[live])).long() - 2)  # amax / 2^e lands in [4, 8)
    back = R.dequantize(packed, s).reshape(3, 3, 32)
    unit = torch.exp2(e.double())[..., None]  # the block's scale: e2m1 steps are 0.5, 1 and 2 units apart
    inside = blocks.abs() <= 6 * unit
    assert ((back - blocks).abs() <= unit)[inside].all()  # nearest code: within half of the widest step
    assert torch.equal(back[~inside], (6 * unit * blocks.sign()).expand_as(blocks)[~inside])  # [6, 8) saturates
    assert (~inside).any() and (back[0, 1] == 0).all()
    # ties go to the even code: 0.25 -> 0, 0.75 -> 1.0, 2.5 -> 2.0, 5.0 -> 4.0 (with a block scale of 1: amax 4)
    y = torch.zeros(1, 32)
    y[0, :5] = torch.tensor([4.0, 0.25, 0.75, 2.5, 5.0])
    assert R.dequantize(*R.quantize_mxfp4(y))[0, :5].tolist() == [4.0, 0.0, 1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="multiple of 32"):
        R.quantize_mxfp4(torch.zeros(2, 40))


def test_ladder_and_baseline():
    assert [v.name for v in wb.variants(OP)] == ["torch_dequant", "triton_decode", "triton_dot_scaled"]
    assert [v.name for v in wb.known_wrong(OP)] == ["wrong_b_nibble_order"]
    assert wb.get_op(OP).dtypes == (torch.bfloat16,)
    assert wb.variant(OP, "triton_dot_scaled").gpu_only and not wb.variant(OP, "triton_decode").gpu_only
    a, sa, b, sb = _inputs(6, 9, 128)
    out = wb.variant(OP, "torch_dequant")(a, sa, b, sb)
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.double(), wb.reference(OP)(a, sa, b, sb), rtol=4e-3, atol=1e-3)


BAD = [
    (lambda a, sa, b, sb: (a.to(torch.int8), sa, b, sb), r"gemm_mxfp4: input a\[M,K/2\].*uint8"),
    (lambda a, sa, b, sb: (a, sa, b[:, :-16].contiguous(), sb), r"gemm_mxfp4: a\[M,K/2\] and b\[N,K/2\] must share K"),
    (lambda a, sa, b, sb: (a[:, :-1].contiguous(), sa, b[:, :-1].contiguous(), sb),
     r"gemm_mxfp4: K = 2 \* a.shape\[1\] = 62 must be a multiple of the MX block of 32"),
    (lambda a, sa, b, sb: (a, sa.float(), b, sb), r"gemm_mxfp4: input a_scale\[M,K/32\].*uint8"),
    (lambda a, sa, b, sb: (a, sa, b, sb[:, :1].contiguous()),
     r"gemm_mxfp4: b_scale must hold one e8m0 scale per row and block of 32 values along K, \[N, K/32\] = \[7, 2\], "
     r"got \[7, 1\]"),
    (lambda a, sa, b, sb: (a, sa.T.contiguous(), b, sb), r"gemm_mxfp4: a_scale must hold one e8m0 scale per row"),
]


@pytest.mark.parametrize("mutate,match", BAD)
def test_bad_inputs_name_the_op_and_what_was_expected(mutate, match):
    args = mutate(*_inputs())
    for fn in (wb.variant(OP, "torch_dequant"), wb.variant(OP, "triton_decode"), wb.reference(OP)):
        with pytest.raises(wb.OpError, match=match):
            fn(*args)


@pytest.mark.parametrize("shape", [(0, 5, 32), (4, 0, 32), (4, 5, 0)])
def test_empty_problems(shape):
    inputs = _inputs(*shape)
    ref = wb.reference(OP)(*inputs)
    for name in ("torch_dequant", "triton_decode"):
        out = wb.variant(OP, name)(*inputs)
        assert out.shape == ref.shape and out.dtype == torch.bfloat16
        assert torch.equal(out.double(), ref), name  # zeros for K = 0


# ------------------------------------------------------------------------------------------------ kernels
def test_triton_decode_passes_the_checks():
    reps = variant_reports(OP, "triton_decode")
    assert reps and all(r.ok for r in reps), [r.summary() for r in reps]
    assert {(17, 33, 64), (40, 20, 96)} <= {(c.shape["M"], c.shape["N"], c.shape["K"]) for r in reps for c in r.runs}


@triton.jit
def _decode_all(codes_ptr, scales_ptr, v_ptr, s_ptr):
    i = tl.arange(0, 16)
    tl.store(v_ptr + i, e2m1_to_f16(tl.load(codes_ptr + i)).to(tl.float32))
    j = tl.arange(0, 256)
    tl.store(s_ptr + j, e8m0_to_f32(tl.load(scales_ptr + j)))


def test_triton_decode_helpers_cover_every_code_and_scale():
    v, s = torch.empty(16), torch.empty(256)
    _decode_all[(1,)](torch.arange(16, dtype=torch.int32), torch.arange(256, dtype=torch.int32), v, s)
    assert v.tolist() == [_e2m1(c) for c in range(16)]
    want = R.decode_e8m0(torch.arange(256).to(torch.uint8)).float()
    assert torch.equal(s[:255], want[:255]) and math.isnan(s[255])  # 2^-127 (a subnormal) included


def test_dot_scaled_refuses_cpu_mode_naming_the_interpreter():
    if wb.MODE == "gpu":
        pytest.skip("a GPU runs tl.dot_scaled")
    with pytest.raises(wb.UnsupportedHere, match="interpreter has no tl.dot_scaled"):
        wb.variant(OP, "triton_dot_scaled")(*_inputs())
    rep = wb.check(wb.variant(OP, "triton_dot_scaled"), OP)
    assert not rep.runs and "GPU-only" in rep.summary()


def test_dot_scaled_compiles_emulated_on_sm90_and_native_on_sm100():
    from kernels.gemm_mxfp4.v2_triton_dot_scaled import compiled_ptx

    r = wb.inspect(wb.variant(OP, "triton_dot_scaled"), arch="sm_90")  # Hopper: decoded to bf16, bf16 wgmma
    assert ".bf16.bf16" in r.ptx and "HGMMA" in r.sass and "tcgen05" not in r.ptx
    ptx = compiled_ptx(100)  # Blackwell: codes and scales to the block-scaled MMA
    assert "tcgen05.mma" in ptx and "kind::mxf4.block_scale" in ptx and ".target sm_100a" in ptx
