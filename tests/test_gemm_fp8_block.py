"""gemm_fp8_block: the contract against an independent float64 sum, bad inputs, empty problems, the known-wrong
kernel's diagnosis, the sm_90 compile of the Triton kernel, and the implement drill's model and a classic wrong answer.

The variants' own checker runs are tests/test_ops.py's (``variant_reports`` / ``wrong_report``, shared): this file
reads the same reports instead of running them again.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import triton
import triton.language as tl

import workbench as wb
from kernels.gemm_fp8_block import reference as R
from kernels.moe_fp8 import reference as moe_ref
from tests._ops import variant_reports, wrong_report
from workbench.practice import store as progress_store

OP = "gemm_fp8_block"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every drill attempt goes to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


def _inputs(M=9, N=150, K=260, seed=0):
    return wb.make_inputs(OP, M=M, N=N, K=K, dtype="bfloat16", seed=seed)


def _by_groups(a, a_scale, b, b_scale):
    """c = sum over 128-wide K groups of (a_g @ b_g.T) * a_scale[:, g] * b_scale[n // 128, g], in float64 (CPU)."""
    a, a_scale, b, b_scale = (t.cpu() for t in (a, a_scale, b, b_scale))
    m, k = a.shape
    n = b.shape[0]
    c = torch.zeros((m, n), dtype=torch.float64)
    col_block = torch.arange(n) // 128
    for g in range(-(-k // 128)):
        ks = slice(128 * g, min(128 * (g + 1), k))
        part = a[:, ks].double() @ b[:, ks].double().T
        c += part * a_scale[:, g, None].double() * b_scale[col_block, g][None, :].double()
    return c


# ------------------------------------------------------------------------------------------------ contract
@pytest.mark.parametrize("shape", [(9, 150, 260), (5, 7, 128), (3, 129, 1)])
def test_reference_is_the_sum_of_scaled_group_partials(shape):
    a, sa, b, sb = _inputs(*shape)
    m, n, k = shape
    assert a.dtype == b.dtype == torch.float8_e4m3fn and sa.dtype == sb.dtype == torch.float32
    assert tuple(sa.shape) == (m, -(-k // 128)) and tuple(sb.shape) == (-(-n // 128), -(-k // 128))
    ref = wb.reference(OP)(a, sa, b, sb)
    assert ref.dtype == torch.float64 and ref.shape == (m, n)
    # torch.allclose, not torch.testing.assert_close: that one imports torch.distributed (~7 s cold)
    assert torch.allclose(ref.cpu(), _by_groups(a, sa, b, sb), rtol=1e-12, atol=1e-12)


def test_inputs_are_quantized_with_moe_fp8s_quantizers():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(4, 300, generator=g), torch.randn(150, 300, generator=g)
    a, sa, b, sb = R.quantize_operands(x, w)
    qa, qsa = moe_ref.quantize_groups(x)
    qb, qsb = moe_ref.quantize_blocks(w[None])
    assert torch.equal(a.view(torch.uint8), qa.view(torch.uint8)) and torch.equal(sa, qsa)
    assert torch.equal(b.view(torch.uint8), qb[0].view(torch.uint8)) and torch.equal(sb, qsb[0])
    # Each group's largest |value| lands on 448 (e4m3's largest), and dequantizing gives x back within e4m3's
    # rounding: 3 mantissa bits, half a step = 1/16 relative at most (subnormals aside: absolute 2^-10 * scale).
    per_group = [a[:, :128], a[:, 128:256], a[:, 256:]]  # the last group is 44 wide
    assert all(torch.equal(q.float().abs().amax(dim=1), torch.full((4,), 448.0)) for q in per_group)
    xd = moe_ref.dequantize_groups(a, sa)
    assert ((xd - x.double()).abs() <= x.double().abs() / 16 + sa.double().repeat_interleave(128, 1)[:, :300]).all()
    # The ragged last block of b (rows 128..149, columns 256..299) has its own scale: its amax / 448.
    assert sb[1, 2].item() == pytest.approx(w[128:, 256:].abs().max().item() / 448, rel=1e-6)


def test_torch_baseline_and_ladder():
    names = [v.name for v in wb.variants(OP)]
    assert names == ["torch_dequant", "triton_block"]
    assert [v.name for v in wb.known_wrong(OP)] == ["wrong_scale_first_group"]
    assert wb.get_op(OP).dtypes == (torch.bfloat16,)
    a, sa, b, sb = _inputs(5, 7, 300)
    out = wb.variant(OP, "torch_dequant")(a, sa, b, sb)
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.double().cpu(), _by_groups(a, sa, b, sb), rtol=4e-3, atol=1e-2)


BAD = [
    (lambda a, sa, b, sb: (a.to(torch.float16), sa, b, sb), r"gemm_fp8_block: input a\[M,K\].*float8_e4m3fn"),
    (lambda a, sa, b, sb: (a, sa, b[:, :-1].contiguous(), sb), "gemm_fp8_block: a.M,K. and b.N,K. must share K"),
    (lambda a, sa, b, sb: (a, sa.double(), b, sb), r"gemm_fp8_block: input a_scale\[M,G\(K\)\].*float32"),
    (lambda a, sa, b, sb: (a, sa, b, sb.half()), r"gemm_fp8_block: input b_scale\[G\(N\),G\(K\)\].*float32"),
    (lambda a, sa, b, sb: (a, sa[:, :1].contiguous(), b, sb),
     r"gemm_fp8_block: a_scale must hold one scale per row of a and 128-wide K group.*\[9, 3\], got \[9, 1\]"),
    (lambda a, sa, b, sb: (a, sa, b, sb.T.contiguous()),
     r"gemm_fp8_block: b_scale must hold one scale per 128x128 block of b.*\[2, 3\], got \[3, 2\]"),
    (lambda a, sa, b, sb: (a, sa, b, sb[0]), r"gemm_fp8_block: input b_scale.* must be 2-D"),
    (lambda a, sa, b, sb: (a, sa.T.contiguous().T, b, sb), "gemm_fp8_block: input a_scale.* must be contiguous"),
]


@pytest.mark.parametrize("mutate,match", BAD)
def test_bad_inputs_name_the_op_and_what_was_expected(mutate, match):
    args = mutate(*_inputs(9, 150, 300))
    for fn in (wb.variant(OP, "triton_block"), wb.variant(OP, "torch_dequant"), wb.reference(OP)):
        with pytest.raises(wb.OpError, match=match):
            fn(*args)


@pytest.mark.parametrize("shape", [(0, 33, 300), (17, 0, 300), (17, 33, 0)])
def test_empty_problems(shape):
    inputs = _inputs(*shape)
    ref = wb.reference(OP)(*inputs)
    for name in ("torch_dequant", "triton_block"):
        out = wb.variant(OP, name)(*inputs)
        assert out.shape == ref.shape and out.dtype == torch.bfloat16
        assert torch.equal(out.double().cpu(), ref.cpu()), name  # zeros for K = 0


# ------------------------------------------------------------------------------------------------ kernels
def test_triton_block_passes_at_ragged_groups_and_blocks():
    (rep,) = variant_reports(OP, "triton_block")
    assert rep.ok, rep.summary()
    shapes = {(c.shape["M"], c.shape["N"], c.shape["K"]) for c in rep.runs}
    assert {(40, 20, 300), (9, 150, 260)} <= shapes  # a ragged last K group; a ragged second block row of b


def test_wrong_kernel_fails_only_past_one_k_group_and_is_scattered():
    rep = wrong_report(OP, "wrong_scale_first_group")
    assert rep.diagnosis == "scattered", rep.summary()
    by_k = {c.shape["K"]: c.ok for c in rep.runs}
    assert by_k[1] and by_k[9] and not by_k[300], by_k  # one group: one scale, right; K = 300: wrong
    (fail,) = rep.failures
    assert fail.n_mismatch > 0.8 * fail.n_elements  # most elements, by varying amounts


def test_triton_block_compiles_to_fp8_wgmma_for_sm90():
    r = wb.inspect(wb.variant(OP, "triton_block"), arch="sm_90")  # in-process, even under the interpreter
    assert "wgmma.mma_async" in r.ptx and r.instruction_mix["QGMMA (fp8)"], r.instruction_mix
    assert r.spill_stores == 0, r.ptxas_log


# ------------------------------------------------------------------------------------------------ the drill
@triton.jit
def _scales_after_loop_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                              DOT_F16: tl.constexpr):
    # A learner's answer: the K loop sums raw e4m3 products over all of K, as gemm_fp8 does, and the scales come
    # in once after it (the last group's, the ones a loop variable would leave): right only when K <= 128.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, 128)
    n_groups = (K + 127) // 128
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for g in range(0, n_groups):
        ks = g * 128 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        if DOT_F16:
            a, b = a.to(tl.float16), b.to(tl.float16)
        acc = tl.dot(a, b, acc)
    last = n_groups - 1
    sa = tl.load(as_ptr + rm * n_groups + last, mask=rm < M, other=0.0)
    sb = tl.load(bs_ptr + (rn // 128) * n_groups + last, mask=rn < N, other=0.0)
    out = acc * (sa[:, None] * sb[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], out.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _scales_after_loop(a, a_scale, b, b_scale):
    m, k = a.shape
    n = b.shape[0]
    c = wb.empty((m, n), torch.bfloat16)
    if c.numel():
        _scales_after_loop_kernel[(triton.cdiv(m, 32), triton.cdiv(n, 32))](
            a, a_scale, b, b_scale, c, m, n, k, BM=32, BN=32, DOT_F16=wb.mode() != "gpu")
    return c


def _drill(shape):
    d = wb.drill("gemm-fp8-block-implement-triton")
    return dataclasses.replace(d, shapes=(shape,))


def test_drill_states_the_contract_and_the_rule():
    d = wb.drill("gemm-fp8-block-implement-triton")
    assert d.kind == "implement" and d.level == "hard" and d.topic == "tensor-cores" and d.backend == "triton"
    assert d.model == "triton_block" and d.chapter == "01-gemm" and 2 <= len(d.hints) <= 3
    text = d.statement()
    assert d.rule() in text and "torch may allocate and take views" in text
    assert "a_scale[M, ceil(K/128)]" in text and "b_scale[ceil(N/128), ceil(K/128)]" in text
    assert {(s["M"], s["N"], s["K"]) for s in d.shapes} >= {(20, 40, 300), (9, 150, 260)}


def test_drill_model_passes_and_scales_after_the_loop_fail():
    d = _drill({"M": 20, "N": 40, "K": 300})
    res = d.submit(d.model_answer())
    assert res.passed, res.feedback
    res = d.submit(_scales_after_loop)
    assert not res.passed and "**scattered**" in res.feedback, res.feedback
    # ... and the same answer is right with one K group: the drill's shapes must reach past 128.
    assert wb.check(_scales_after_loop, OP, shapes=[{"M": 17, "N": 33, "K": 100}], seeds=(0,), probes=False).ok
