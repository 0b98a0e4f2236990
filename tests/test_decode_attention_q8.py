"""decode_attention_q8: the contract's errors, the quantized and poisoned inputs, the reference against a direct
float64 loop, every int8 and e4m3 code through the kernels, GQA groups past one warp's 8 heads, the recomputed
mistakes, the quantization error study (tests/_ops.py checks every variant once per run; test_ops.py asserts that
each passes and that the known-wrong kernel gets its diagnosis)."""

from __future__ import annotations

import math

import pytest
import torch

import workbench as wb
from kernels.decode_attention import reference as R
from kernels.decode_attention_q8 import reference as Q
from tests._ops import variant_reports, wrong_report
from tests.conftest import cuda_engine_ready
from tests.test_decode_attention import _direct, _every_entry

OP = "decode_attention_q8"
FP8 = torch.float8_e4m3fn
KERNELS = ("cuda_gqa", "triton_split")


def _inputs(case: str = "random", dtype: torch.dtype = torch.float32, seed: int = 0, **shape: int) -> tuple:
    base = {"B": 5, "Hq": 4, "Hkv": 2, "L": 9, "D": 8, "page": 4}
    return wb.make_inputs(OP, dtype=dtype, seed=seed, case=case, **{**base, **shape})


def _kernel(name: str) -> wb.Variant:
    v = wb.variant(OP, name)
    if v.backend == "cuda" and (why := cuda_engine_ready()):
        pytest.skip(f"CUDA C engine not ready: {why}")
    return v


# ------------------------------------------------------------------------------------------------- contract errors
def _e4m3(t: torch.Tensor) -> torch.Tensor:
    return t.float().to(FP8)


BAD = [
    (lambda a: (a[0], a[1].half(), *a[2:]), r"decode_attention_q8: input k_q\[P,page,Hkv,D\] must have dtype in "
                                            r"\['int8', 'float8_e4m3fn'\], got float16"),
    (lambda a: (a[0], a[1], a[2], _e4m3(a[3]), *a[4:]),
     r"decode_attention_q8: k_q and v_q must share one code dtype \(int8 or float8_e4m3fn\)"),
    (lambda a: (a[0], a[1], a[2][:, :, :1].contiguous(), *a[3:]),
     r"decode_attention_q8: k_scale must be \[P,page,Hkv\] = \[.*\] \(one scale per token slot and KV head\)"),
    (lambda a: (*a[:4], a[4][..., None].contiguous(), *a[5:]), r"decode_attention_q8: input v_scale\[P,page,Hkv\] "
                                                              r"must be 3-D"),
    (lambda a: (a[0], a[1], a[2].half(), *a[3:]), r"decode_attention_q8: input k_scale\[P,page,Hkv\] must have dtype "
                                                  r"in \['float32'\], got float16"),
    (lambda a: (a[0].to(torch.int8), *a[1:]), r"decode_attention_q8: input q\[B,Hq,D\] must have dtype in"),
    (lambda a: (a[0][:, :3].contiguous(), *a[1:]), r"decode_attention_q8: Hq must be a multiple of Hkv"),
    (lambda a: (a[0], a[1][..., :4].contiguous(), a[2], a[3][..., :4].contiguous(), *a[4:]),
     r"decode_attention_q8: k_q\[P,page,Hkv,D\] must have q's head dim D=8"),
    (lambda a: (a[0], a[1], a[2], a[3][:-1].contiguous(), *a[4:]), r"decode_attention_q8: v_q must have k_q's shape"),
    (lambda a: (*a[:5], a[5].long(), a[6]), r"decode_attention_q8: input block_table\[B,maxp\].*int32"),
    (lambda a: (*a[:6], a[6].clone().fill_(0)), r"decode_attention_q8: every seq_lens\[b\] must be >= 1"),
    (lambda a: (*a[:6], a[6].clone().fill_(a[5].shape[1] * a[1].shape[1] + 1)),
     r"decode_attention_q8: seq_lens\[b\] = 17 does not fit the block table: maxp \* page = 4 \* 4 = 16"),
    (lambda a: (*a[:5], a[5][:-1].contiguous(), a[6]), r"decode_attention_q8: block_table\[B,maxp\] and seq_lens"),
]


@pytest.mark.parametrize("change,msg", BAD, ids=range(len(BAD)))
def test_bad_inputs_raise_op_errors_naming_the_op(change, msg):
    args = change(_inputs())
    for fn in (wb.reference(OP), *(wb.variant(OP, n) for n in ("torch_dequant", *KERNELS))):
        with pytest.raises(wb.OpError, match=msg):
            fn(*args)


def test_bad_scale_and_unknown_cases_are_refused():
    with pytest.raises(wb.OpError, match="decode_attention_q8: scale must be None or a finite float"):
        Q.validate(*_inputs(), scale=float("inf"))
    with pytest.raises(wb.OpError, match=r"decode_attention_q8 has input cases \['random', 'e4m3'\]"):
        _inputs(case="int4")


# --------------------------------------------------------------------------------- quantized, poisoned inputs
@pytest.mark.parametrize("case", ["random", "e4m3"])
def test_codes_quantize_the_float_cache_per_token_and_head(case):
    shape = {"B": 6, "Hq": 8, "Hkv": 2, "L": 11, "D": 16, "page": 4}
    q, kq, ks, vq, vs, bt, sl = _inputs(case, seed=3, **shape)
    _, k, v, bt0, sl0 = R.make(shape, torch.float32, 3, torch.device("cpu"))  # the float cache it quantized
    assert torch.equal(bt, bt0) and torch.equal(sl, sl0), "decode_attention's pages and lengths"
    fmt = Q.CASE_FORMAT[case]
    code_dtype, top = Q.FORMATS[fmt]
    owned = ~torch.isnan(k).any(-1)
    for x, codes, scales in ((k, kq, ks), (v, vq, vs)):
        assert codes.dtype == code_dtype and scales.dtype == torch.float32
        c, s, xo = codes[owned].double(), scales[owned].double(), x[owned].double()
        assert bool((c.abs().amax(-1) == top).all()), "each row's absmax maps to the format's largest code"
        assert torch.allclose(s, xo.abs().amax(-1) / top, rtol=1e-6)
        err = (c * s[:, None] - xo).abs()
        if fmt == "int8":  # rounded to nearest: within half a step
            assert bool((err <= s[:, None] / 2 * (1 + 1e-5)).all())
        else:  # 3 mantissa bits: within 2^-4 of |x| (normal codes), or half a subnormal step 2^-10 * scale
            assert bool((err <= torch.maximum(xo.abs() / 16, s[:, None] * 2.0 ** -10) * (1 + 1e-5)).all())
        assert bool(torch.isnan(scales[~owned]).all()) and bool(torch.isfinite(scales[owned]).all())
        junk = codes[~owned].view(torch.uint8)
        if fmt == "e4m3":
            assert bool(torch.isnan(codes[~owned].float()).all()), "e4m3's NaN code in every unowned row"
        else:
            assert junk.unique().numel() > 100, "random junk codes in the unowned rows"


def test_make_is_reproducible_and_q_takes_the_dtype():
    a, b, c = _inputs(seed=2), _inputs(seed=2), _inputs(seed=5)
    for x, y in zip(a, b, strict=True):  # the same bits (NaN scales included)
        assert torch.equal(x.view(torch.uint8), y.view(torch.uint8))
    assert not torch.equal(a[1], c[1])
    h = _inputs("e4m3", torch.bfloat16)
    assert h[0].dtype == torch.bfloat16 and h[1].dtype == FP8 and h[2].dtype == torch.float32
    assert wb.get_op(OP).dtype_of(*h) == torch.bfloat16


# ------------------------------------------------------------------------------------------------- the reference
@pytest.mark.parametrize("case", ["random", "e4m3"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_reference_equals_a_direct_float64_loop_over_the_dequantized_cache(case, scale):
    q, kq, ks, vq, vs, bt, sl = _inputs(case, B=6, Hq=8, Hkv=2, L=11, D=8, page=4, seed=2)
    want = _direct(q, Q.dequantize(kq, ks), Q.dequantize(vq, vs), bt, sl, 1 / math.sqrt(8) if scale is None else scale)
    got = wb.reference(OP)(q, kq, ks, vq, vs, bt, sl, scale=scale)
    assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_torch_baseline_agrees_with_the_reference_in_every_dtype():
    for dt, tol in ((torch.float32, 1e-5), (torch.float16, 3e-3), (torch.bfloat16, 3e-2)):
        for case in ("random", "e4m3"):
            args = _inputs(case, dt, B=4, Hq=8, Hkv=1, L=10, D=16, page=4)
            out = wb.variant(OP, "torch_dequant")(*args)
            assert out.dtype == dt and torch.allclose(out.double(), wb.reference(OP)(*args), atol=tol, rtol=tol)


# ------------------------------------------------------------------------------------------------- the kernels
def _every_code(case: str) -> tuple:
    """One one-token sequence whose V rows hold all 256 byte codes (2 KV heads x 128) with scale 1: the attention
    over one token is its V row, so the output is the decoded codes themselves."""
    q, kq, ks, vq, vs, bt, sl = _inputs(case, B=1, Hq=2, Hkv=2, L=1, D=128, page=1)
    vq, vs = vq.clone(), vs.clone()
    vq.view(torch.uint8)[int(bt[0, 0]), 0] = torch.arange(256, dtype=torch.uint8).reshape(2, 128)
    vs[int(bt[0, 0]), 0] = 1.0
    return q, kq, ks, vq, vs, bt, sl


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("case", ["random", "e4m3"])
def test_every_byte_code_decodes_as_torch_decodes_it(name, case):
    args = _every_code(case)
    want = args[3][int(args[5][0, 0]), 0].float()[None]  # torch's decoding of the codes: [1, 2, 128]
    got = _kernel(name)(*args)
    if case == "e4m3" and name == "triton_split" and wb.mode() == "cpu":
        # The Triton 3.7 interpreter decodes e4m3's NaN codes 0x7F / 0xFF as +-480 (measured); a GPU's convert
        # gives NaN. Every other code must still be exact; unowned rows stay poisoned through their NaN scales.
        nan_codes = torch.isnan(want)
        assert torch.equal(got[nan_codes].abs(), torch.full((2,), 480.0))
        got, want = got[~nan_codes], want[~nan_codes]
    assert torch.equal(torch.isnan(got), torch.isnan(want)), "e4m3's NaN codes 0x7F and 0xFF, and nothing else"
    assert torch.equal(got.nan_to_num(), want.nan_to_num()), "every code exact: subnormals, +-448, -0, -128"


@pytest.mark.parametrize("case", ["random", "e4m3"])
def test_cuda_gqa_serves_groups_larger_than_a_warps_eight_heads(case):
    # the check shapes' groups are 1, 4 and 8; a group of 16, 12 (a ragged second chunk) or 24 takes several warps
    v = _kernel("cuda_gqa")
    for hq, hkv in ((16, 1), (12, 1), (24, 2)):
        args = _inputs(case, B=3, Hq=hq, Hkv=hkv, L=11, D=40, page=4, seed=1)
        assert torch.allclose(v(*args).double(), wb.reference(OP)(*args), atol=2e-5, rtol=2e-5), (hq, hkv)


def test_an_empty_batch_gives_an_empty_output_everywhere():
    args = _inputs(B=0)
    assert Q.validate(*args)["L"] == 0
    for v in wb.variants(OP):
        if v.backend != "cuda" or not cuda_engine_ready():
            assert tuple(v(*args).shape) == (0, 4, 8), v.name


def test_variant_reports_cover_the_dtypes_shapes_and_both_code_formats():
    # float32 at every check shape in both code formats; fp16 and bf16 in both formats at the three cheapest
    # shapes (tests/_ops.py: the Triton interpreter's cost)
    reps = variant_reports(OP, "triton_split")
    cases = [c for rep in reps for c in rep.cases]
    every = {tuple(s.items()) for s in R.CHECK_SHAPES}
    for dt in ("float32", "float16", "bfloat16"):
        covered = {(tuple(c.shape.items()), c.case) for c in cases if c.dtype == dt}
        want = every if dt == "float32" else {tuple(s.items()) for s in R.CHECK_SHAPES[:3]}
        assert covered == {(s, case) for s in want for case in ("random", "e4m3")}, dt
    assert any(c.probe == "flag" and c.shape.get("scale") == 0.3 for rep in reps for c in rep.probes)


def test_the_forgotten_v_scale_fails_in_both_formats():
    rep = wrong_report(OP, "wrong_v_scale_forgotten")
    assert {c.case for c in rep.cases if not c.ok} == {"random", "e4m3"}
    assert all(c.diagnosis == "scale" for c in rep.cases if not c.ok), rep.summary()


# -------------------------------------------------------------------------------------------- recomputed mistakes
def test_explain_names_forgotten_scales_a_dropped_tail_and_nothing_for_a_right_answer():
    args = _inputs(B=4, Hq=4, Hkv=2, L=9, D=8, page=4, seed=4)
    q, kq, ks, vq, vs, bt, sl = args
    ref = Q.reference(*args)
    assert Q.explain([ref], [ref], args, {}, 1e-6, 1e-6) is None
    for k_scale, v_scale in ((ks, Q.unscaled(vs)), (Q.unscaled(ks), vs)):
        forgot = Q.reference(q, kq, k_scale, vq, v_scale, bt, sl)
        assert Q.explain([forgot], [ref], args, {}, 1e-6, 1e-6) == "scale"
    short = sl - 1
    short[short == 0] = 1
    assert Q.explain([Q.reference(*args[:6], short)], [ref], args, {}, 1e-6, 1e-6) == "masking"


def test_a_kernel_that_reads_past_its_pages_is_caught_by_the_nan_scales():
    # every block-table entry gathered (clamped into the pool), the scores past seq_lens masked: NaN scales * 0
    every = _every_entry(clamp=True)

    def fn(q, k_q, k_scale, v_q, v_scale, block_table, seq_lens, scale=None):
        k = k_q.float() * k_scale[..., None]
        return every(q, k, v_q.float() * v_scale[..., None], block_table, seq_lens, scale)

    rep = wb.check(fn, OP, shapes=R.CHECK_SHAPES[1:3], seeds=(0,), probes=False)
    assert rep.diagnosis == "computed_nan", rep.summary()


# ------------------------------------------------------------------------------------------------- costs, study
def test_bytes_count_codes_scales_q_out_and_tables():
    s = {"B": 8, "Hq": 32, "Hkv": 8, "L": 8192, "D": 128, "page": 16}
    tables = 4 * 8 * (8192 // 16 + 1)
    assert wb.get_op(OP).bytes(dtype="bfloat16", **s) == 2 * 8 * 32 * 128 * 2 + 8 * 8192 * 8 * 2 * (128 + 4) + tables
    fp16 = wb.get_op("decode_attention").bytes(dtype="float16", **s)
    assert wb.get_op(OP).bytes(dtype="float16", **s) / fp16 == pytest.approx(264 / 512, rel=1e-3)
    assert wb.get_op(OP).flops(**s) == wb.get_op("decode_attention").flops(**s) == 4 * 8 * 32 * 8192 * 128


def test_error_vs_bytes_rows():
    rows = Q.error_vs_bytes(B=4, Hq=8, Hkv=2, L=64, D=128, page=16, seed=1)
    assert [r["format"] for r in rows] == ["fp16", "bf16", "int8", "e4m3"]
    assert [r["kv_bytes_per_token_head"] for r in rows] == [512, 512, 264, 264]  # 2 * 128 * 2; 2 * (128 + 4)
    assert [Q.kv_bytes_per_token_head(f, 40) for f in Q.STUDY_FORMATS] == [160, 160, 88, 88]
    rms = [r["rms_err"] for r in rows]
    assert 0 < rms[0] < rms[1] < rms[2] < rms[3], rms  # 11, 8, ~7 (int8 on a row's absmax) and 4 significant bits
    assert all(r["rms_err"] <= r["max_abs_err"] for r in rows)
    # loose sanity bounds, not a theorem: within twice each format's worst error on one value of |x| <= 4.5 (the
    # output is a softmax-weighted mean of values; K's errors move the weights a little): half an fp16 / bf16 ulp,
    # half an int8 step of a row's amax, 2^-4 of |x| for e4m3
    assert rows[0]["max_abs_err"] < 4.5 * 2.0 ** -11 * 2 and rows[1]["max_abs_err"] < 4.5 * 2.0 ** -8 * 2
    assert rows[2]["max_abs_err"] < 4.5 / 254 * 2 and rows[3]["max_abs_err"] < 4.5 / 16 * 2
    again = Q.error_vs_bytes(B=4, Hq=8, Hkv=2, L=64, D=128, page=16, seed=1)
    assert again == rows
