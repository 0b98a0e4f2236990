"""The registry and op contracts: variants, input generation, float64 references and the torch baselines."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import workbench as wb
from tests._ops import variant_report
from workbench.checker import DIAGNOSES
from workbench.registry import BACKENDS, Variant, contract

OPS = ("vecadd", "gemm", "softmax", "attention", "moe", "rmsnorm", "gemm_fp8", "attention_bwd", "moe_topk",
       "moe_align", "moe_fp8", "transpose", "gemm_fp8_block", "decode_attention", "lse_merge", "decode_attention_q8",
       "layernorm", "layernorm_bwd", "add_rmsnorm", "rope", "gemm_w8a8", "gemm_mxfp4", "all_reduce",
       "reduce_scatter", "all_gather", "all_to_all", "ring_attention", "tp_mlp")
# The five contracts of the foundation issue; later issues add ops (rmsnorm, gemm_fp8, attention_bwd, moe_fp8...).
FOUNDATION_OPS = ("vecadd", "gemm", "softmax", "attention", "moe")
# gemm_fp8, gemm_fp8_block and moe_fp8 take fp8 inputs plus scales, attention_bwd returns (dq, dk, dv), moe_topk and
# moe_align return float32/int32 tuples whatever the input dtype, decode_attention takes int32 block tables and
# NaN-poisoned pages (its bytes do not halve at fp16), lse_merge fp32 log-sum-exps and decode_attention_q8 int8/fp8
# codes with fp32 scales: each has its own tests (tests/test_decode_attention.py for decode_attention and lse_merge,
# tests/test_decode_attention_q8.py); the generic ones cover the rest.
GENERIC = tuple(o for o in OPS if o not in ("gemm_fp8", "gemm_fp8_block", "attention_bwd", "moe_topk", "moe_align",
                                            "moe_fp8", "decode_attention", "lse_merge", "decode_attention_q8",
                                            "gemm_w8a8", "gemm_mxfp4",  # int8 / packed e2m1 codes with scales
                                            "layernorm_bwd", "rope",  # rope: int32 positions (tests/test_rope.py)
                                            # distributed: inputs per rank (tests/test_comm.py)
                                            "all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                            "ring_attention", "tp_mlp"))  # (tests/test_ring_attention.py, ...tp_mlp)
ZERO_FLOP_OPS = ("transpose",)  # moves bits, computes nothing

def test_ops_are_the_registered_contracts():
    assert set(FOUNDATION_OPS) <= set(OPS)
    assert sorted(wb.ops()) == sorted(OPS)


@pytest.mark.parametrize("op", GENERIC)
def test_variants_are_well_formed(op):
    vs = wb.variants(op)
    assert vs, f"{op} has no variants"
    spec = wb.get_op(op)
    for v in vs:
        assert isinstance(v, Variant)
        assert v.op == op
        assert isinstance(v.name, str) and v.name
        assert v.backend in BACKENDS
        assert isinstance(v.idea, str) and v.idea.strip() and "\n" not in v.idea
        assert isinstance(v.gpu_only, bool)
        assert v.source is not None and v.source.is_file(), f"{op}/{v.name}: source {v.source} missing"
        if v.backend == "cuda":
            assert v.cu_file is not None and v.cu_file.is_file(), f"{op}/{v.name}: cu_file {v.cu_file} missing"
        assert not v.known_wrong
        for shape in spec.check_shapes:
            f = v.flops(**shape)
            for dt in (torch.float32, torch.float16):
                b = v.bytes(dtype=dt, **shape)
                assert math.isfinite(b) and b > 0, f"{op}/{v.name} bytes({shape}) = {b}"
            assert math.isfinite(f) and (f > 0 or op in ZERO_FLOP_OPS), f"{op}/{v.name} flops({shape}) = {f}"
        # fp16 moves half the bytes of fp32 at the same shape
        s = spec.check_shapes[-1]
        assert v.bytes(dtype=torch.float16, **s) == pytest.approx(v.bytes(dtype=torch.float32, **s) / 2)
    names = [v.name for v in vs]
    assert len(names) == len(set(names)), f"duplicate variant names in {op}: {names}"


@pytest.mark.parametrize("op", OPS)
def test_torch_baseline_registered_with_the_contract(op):
    # The op's baseline (the checker's low-precision yardstick) is the first torch variant, defined beside the
    # contract; attention adds one variant per SDPA backend, attention_bwd torch's flash backward, decode_attention
    # a Python loop over sequences (torch_naive).
    torch_vs = wb.variants(op, backend="torch")
    assert torch_vs, op
    assert torch_vs[0].source.name == "reference.py"
    extra = {"attention": 5, "attention_bwd": 1, "moe": int(hasattr(torch, "_grouped_mm")),
             "decode_attention": 1, "layernorm_bwd": 1,
             # the collectives' ladders are torch.distributed code: naive, ring, halving-doubling, pipelined ring...
             "all_reduce": 4, "reduce_scatter": 1, "all_gather": 1, "all_to_all": 1,
             "ring_attention": 2}.get(op, 0)  # the blocking and the overlapped ring
    assert len(torch_vs) == 1 + extra, [v.name for v in torch_vs]


def test_flops_formulas_on_known_shapes():
    assert wb.variant("gemm", "torch_matmul").flops(M=2, N=3, K=5) == 60
    assert wb.variant("vecadd", "torch_add").flops(N=7) == 7
    att = wb.variant("attention", "torch_sdpa")
    full = att.flops(B=1, H=2, Sq=8, Sk=16, D=4, causal=False)
    assert full == 4 * 2 * 8 * 16 * 4
    assert att.flops(B=1, H=2, Sq=8, Sk=16, D=4, causal=True) == full / 2
    assert wb.variant("moe", "torch_loop").flops(T=3, d=4, I=5, E=8, top_k=2) == 6 * 3 * 2 * 4 * 5
    assert wb.variant("gemm", "torch_matmul").bytes(dtype="float16", M=2, N=3, K=5) == (10 + 15 + 6) * 2


@pytest.mark.parametrize("op", GENERIC)
def test_known_wrong_excluded_by_default(op):
    default = {v.name for v in wb.variants(op)}
    wrong = wb.known_wrong(op)
    every = {v.name for v in wb.variants(op, include_wrong=True)}
    assert all(v.known_wrong and v.expected_diagnosis for v in wrong)
    assert not default & {v.name for v in wrong}
    assert every == default | {v.name for v in wrong}
    for v in wrong:
        assert v.expected_diagnosis in DIAGNOSES, f"{op}/{v.name}: unknown diagnosis {v.expected_diagnosis!r}"


def test_there_are_known_wrong_kernels():
    assert sum(len(wb.known_wrong(op)) for op in OPS) >= 3


@pytest.mark.parametrize("op", GENERIC)
def test_make_inputs_reproducible_by_seed(op):
    shape = wb.get_op(op).check_shapes[1]
    sizes, _ = wb.get_op(op).split(shape)
    a = wb.make_inputs(op, seed=3, **sizes)
    b = wb.make_inputs(op, seed=3, **sizes)
    c = wb.make_inputs(op, seed=4, **sizes)
    ta = [t for t in a if isinstance(t, torch.Tensor)]
    tb = [t for t in b if isinstance(t, torch.Tensor)]
    tc = [t for t in c if isinstance(t, torch.Tensor)]
    assert ta and len(ta) == len(tb) == len(tc)
    for x, y in zip(ta, tb, strict=True):
        assert torch.equal(x, y)
    assert any(not torch.equal(x, z) for x, z in zip(ta, tc, strict=True))
    assert [t for t in a if not isinstance(t, torch.Tensor)] == [t for t in c if not isinstance(t, torch.Tensor)]
    for t in ta:
        assert t.dtype == torch.float32 and t.device.type == wb.device().type and t.is_contiguous()
    h = wb.make_inputs(op, seed=3, dtype="float16", **sizes)
    assert all(t.dtype == torch.float16 for t in h if isinstance(t, torch.Tensor))


def test_make_inputs_rejects_missing_and_unknown_sizes():
    with pytest.raises(wb.OpError, match=r"missing \['K'\]"):
        wb.make_inputs("gemm", M=2, N=2)
    with pytest.raises(wb.OpError, match="unknown"):
        wb.make_inputs("vecadd", N=2, Q=1)


# ------------------------------------------------------------------------------------------- references


def test_gemm_reference_matches_matmul():
    a, b = wb.make_inputs("gemm", M=17, N=33, K=9, seed=1)
    ref = wb.reference("gemm")(a, b)
    assert ref.dtype == torch.float64 and ref.shape == (17, 33)
    torch.testing.assert_close(ref, a.double() @ b.double())
    torch.testing.assert_close(ref.float(), torch.matmul(a, b), atol=1e-5, rtol=1e-5)


def test_vecadd_reference():
    x, y = wb.make_inputs("vecadd", N=1025, seed=2)
    torch.testing.assert_close(wb.reference("vecadd")(x, y), (x + y).double(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (17, 33), (3, 1025)])
def test_softmax_reference_matches_torch(shape):
    (x,) = wb.make_inputs("softmax", M=shape[0], N=shape[1], seed=0)
    ref = wb.reference("softmax")(x)
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref, torch.softmax(x.double(), dim=-1))
    torch.testing.assert_close(ref.sum(-1), torch.ones(shape[0], dtype=torch.float64))


def test_softmax_reference_edge_rows():
    x = torch.tensor([[0.0, 1.0, float("-inf")],
                      [1.0e4, 1.0e4 + 1, 1.0e4 - 1],
                      [float("-inf")] * 3])
    ref = wb.reference("softmax")(x)
    expect = torch.softmax(x.double(), dim=-1)
    assert torch.isnan(expect[2]).all()
    assert torch.isnan(ref[2]).all(), "an all -inf row must give NaN, like torch"
    assert ref[0, 2] == 0.0
    torch.testing.assert_close(ref[:2], expect[:2])
    assert torch.isfinite(ref[1]).all()
    # the library's own edge case really contains an all -inf row
    (e,) = wb.make_inputs("softmax", M=5, N=7, case="edge")
    assert torch.isinf(e[2]).all() and torch.isnan(wb.reference("softmax")(e)[2]).all()


@pytest.mark.parametrize("causal,sq,sk", [(False, 17, 17), (True, 17, 17), (False, 17, 33), (True, 33, 17),
                                          (True, 5, 40)])
def test_attention_reference_matches_sdpa(causal, sq, sk):
    q, k, v = wb.make_inputs("attention", B=2, H=2, Sq=sq, Sk=sk, D=16, seed=5)
    ref = wb.reference("attention")(q, k, v, causal=causal)
    assert ref.dtype == torch.float64 and ref.shape == (2, 2, sq, 16)
    expect = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    torch.testing.assert_close(ref, expect)


def test_attention_reference_custom_scale():
    q, k, v = wb.make_inputs("attention", B=1, H=1, Sq=9, Sk=11, D=8, seed=6)
    ref = wb.reference("attention")(q, k, v, scale=0.3)
    expect = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), scale=0.3)
    torch.testing.assert_close(ref, expect)
    assert not torch.allclose(ref, wb.reference("attention")(q, k, v))


def _moe_naive(x, logits, w1, w2, top_k, renormalize=True):
    """Token by token, expert by expert, in float64: an independent statement of the moe contract."""
    x, logits, w1, w2 = (t.double() for t in (x, logits, w1, w2))
    T, d = x.shape
    E = w1.shape[0]
    inter = w1.shape[1] // 2
    out = torch.zeros(T, d, dtype=torch.float64)
    for t in range(T):
        p = [math.exp(v) for v in logits[t].tolist()]
        s = sum(p)
        p = [v / s for v in p]
        chosen = sorted(range(E), key=lambda e: -p[e])[:top_k]
        wsum = sum(p[e] for e in chosen)
        for e in chosen:
            gate = w1[e, :inter] @ x[t]
            up = w1[e, inter:] @ x[t]
            h = gate / (1 + torch.exp(-gate)) * up
            y = w2[e] @ h
            out[t] += (p[e] / wsum if renormalize else p[e]) * y
    return out


@pytest.mark.parametrize("T,d,inter,E,top_k,case", [
    (5, 8, 6, 4, 2, "random"),
    (5, 8, 6, 4, 4, "random"),  # top_k = E
    (6, 8, 6, 4, 1, "random"),  # top_k = 1
    (1, 8, 6, 8, 2, "random"),  # T = 1: six of eight experts get no token
    (7, 8, 6, 4, 2, "one_expert"),
])
@pytest.mark.parametrize("renormalize", [True, False])
def test_moe_reference_matches_naive(T, d, inter, E, top_k, case, renormalize):
    x, logits, w1, w2, k = wb.make_inputs("moe", T=T, d=d, I=inter, E=E, top_k=top_k, case=case, seed=7)
    assert k == top_k
    ref = wb.reference("moe")(x, logits, w1, w2, k, renormalize=renormalize)
    assert ref.dtype == torch.float64 and ref.shape == (T, d)
    torch.testing.assert_close(ref, _moe_naive(x, logits, w1, w2, k, renormalize))
    if case == "one_expert":
        assert (logits.argmax(dim=1) == 0).all()


def test_moe_experts_without_tokens_contribute_nothing():
    x, logits, w1, w2, k = wb.make_inputs("moe", T=1, d=8, I=6, E=8, top_k=1, seed=8)
    chosen = int(logits[0].argmax())
    ref = wb.reference("moe")(x, logits, w1, w2, k)
    w1b, w2b = w1.clone(), w2.clone()
    others = [e for e in range(8) if e != chosen]
    w1b[others] = 1e3  # garbage in experts no token visits must not matter
    w2b[others] = -1e3
    torch.testing.assert_close(wb.reference("moe")(x, logits, w1b, w2b, k), ref)
    # top_k=1 with renormalize: the output is exactly the chosen expert's
    torch.testing.assert_close(ref, _moe_naive(x, logits, w1, w2, 1))


# ---------------------------------------------------------------------------------------- torch baselines


@pytest.fixture(scope="module")
def baseline_reports():
    """Every torch baseline's report, checked once (tests/_ops.py) in every dtype it declares (fp32, fp16, bf16)."""
    return {op: variant_report(op, wb.variants(op, backend="torch")[0].name) for op in OPS}


@pytest.mark.parametrize("op", GENERIC)
def test_torch_baseline_passes_in_every_dtype(op, baseline_reports):
    rep = baseline_reports[op]
    assert rep.ok, rep.summary()
    dtypes = {c.dtype for c in rep.cases}
    assert {"float32", "float16", "bfloat16"} <= dtypes
    assert {tuple(sorted(c.shape.items())) for c in rep.cases} == {
        tuple(sorted(s.items())) for s in wb.get_op(op).check_shapes}
    assert set(wb.get_op(op).cases) == {c.case for c in rep.cases}
    assert not rep.skipped
    # the baseline is not held to its own error (that would be circular)
    assert all(c.torch_err is None for c in rep.cases)


def test_contract_takes_what_a_reference_module_defines():
    def make(): ...
    def validate(): ...
    def reference(): ...
    def flops(): ...
    assert contract({"make": make, "validate": validate, "reference": reference, "flops": flops, "x": 1}) == {
        "make": make, "validate": validate, "reference": reference, "flops": flops}
    with pytest.raises(TypeError, match=r"mod defines no reference\(\)"):
        contract({"__name__": "mod", "make": make, "validate": validate})
