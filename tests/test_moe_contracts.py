"""The moe_topk and moe_align contracts: references against independent statements, the checker's canonical form
and per-output dtypes, bad input, and the padding-waste and model-shape helpers the notebook uses."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from kernels.moe.reference import CPU_SCALE, MODELS, model_shape
from kernels.moe_align.reference import padding_waste, sizes

ALIGN = wb.variant("moe_align", "torch_sort")
TOPK = wb.variant("moe_topk", "torch_topk")


@pytest.mark.parametrize("T,E,k", [(1, 8, 2), (17, 60, 4), (5, 4, 4), (9, 256, 1)])
@pytest.mark.parametrize("renormalize", [True, False])
def test_topk_reference_token_by_token(T, E, k, renormalize):
    (logits, top_k) = wb.make_inputs("moe_topk", T=T, E=E, top_k=k, dtype="float16", seed=3)
    w, ids = wb.reference("moe_topk")(logits, top_k, renormalize)
    assert w.shape == ids.shape == (T, k) and ids.dtype == torch.int32
    for t in range(T):
        p = torch.softmax(logits[t].double(), 0).tolist()
        order = sorted(range(E), key=lambda e: (-p[e], e))[:k]  # largest first, lower id on ties
        assert ids[t].tolist() == order
        want = torch.tensor([p[e] for e in order], dtype=torch.float64)
        if renormalize:
            want = want / want.sum()
        torch.testing.assert_close(w[t], want)


def test_topk_ties_go_to_the_lower_expert_id():
    logits = torch.zeros(2, 6)
    logits[1, 4] = 1.0
    w, ids = wb.reference("moe_topk")(logits, 3)
    assert ids.tolist() == [[0, 1, 2], [4, 0, 1]]
    torch.testing.assert_close(w[0], torch.full((3,), 1 / 3, dtype=torch.float64))


def _align_by_hand(ids: torch.Tensor, E: int, block: int):  # noqa: N803
    n = ids.numel()
    flat = ids.reshape(-1).tolist()
    rows, experts = [], []
    for e in range(E):
        mine = [s for s, x in enumerate(flat) if x == e]
        pad = -(-len(mine) // block) * block - len(mine)
        rows += mine + [n] * pad
        experts += [e] * ((len(mine) + pad) // block)
    return rows, experts


@pytest.mark.parametrize("shape", wb.get_op("moe_align").check_shapes)
@pytest.mark.parametrize("case", ["random", "skewed", "one_expert"])
def test_align_reference_and_baseline_match_a_statement_by_hand(shape, case):
    ids, E, block = wb.make_inputs("moe_align", case=case, seed=5, **shape)
    if case == "one_expert":
        assert (ids[:, 0] == 0).all()
    assert all(len(set(r)) == len(r) for r in ids.tolist())  # a token's experts are distinct
    rows, experts = _align_by_hand(ids, E, block)
    p, nb = sizes(shape["T"], shape["top_k"], E, block)
    for fn in (wb.reference("moe_align"), ALIGN):
        s, e, n = fn(ids, E, block)
        assert s.shape == (p,) and e.shape == (nb,) and n.tolist() == [len(rows)]
        assert s[: len(rows)].tolist() == rows and (s[len(rows):] == ids.numel()).all()
        assert e[: len(experts)].tolist() == experts and (e[len(experts):] == -1).all()


def test_checker_sorts_groups_but_catches_slots_in_the_wrong_group():
    def shuffled(ids, E, block):  # noqa: N803  (legal: order within a group is free)
        s, e, n = ALIGN.fn(ids, E, block)
        s = s.clone()
        for b in range(0, int(n), block):
            s[b:b + block] = s[b:b + block].flip(0)
        return s, e, n

    def swapped(ids, E, block):  # noqa: N803  (illegal: two slots of different experts exchanged)
        s, e, n = ALIGN.fn(ids, E, block)
        s = s.clone()
        s[0], s[int(n) - 1] = s[int(n) - 1].item(), s[0].item()
        return s, e, n

    shapes = [{"T": 17, "top_k": 4, "E": 60, "block": 16}, {"T": 5, "top_k": 4, "E": 4, "block": 1}]
    assert wb.check(shuffled, "moe_align", shapes=shapes)
    rep = wb.check(swapped, "moe_align", shapes=shapes)
    assert not rep and rep.failures[0].worst["output"] == "sorted_ids"


def test_checker_wants_each_outputs_own_dtype():
    def ids_as_int64(logits, top_k, renormalize=True):
        w, ids = TOPK.fn(logits, top_k, renormalize)
        return w, ids.long()

    rep = wb.check(ids_as_int64, "moe_topk", shapes=[{"T": 3, "E": 8, "top_k": 2}], seeds=(0,))
    assert not rep and rep.diagnosis == "bad_output"
    assert "returned ids dtype int64, expected int32" in rep.failures[0].detail
    # a plain function is checked at the op's first dtype when float32 is not one of them (moe_align: int32)
    assert {c.dtype for c in wb.check(ALIGN.fn, "moe_align", shapes=[{"T": 2, "top_k": 1, "E": 2, "block": 2}]
                                      ).cases} == {"int32"}


@pytest.mark.parametrize("args,match", [
    ((torch.tensor([[0, 8]], dtype=torch.int32), 8, 16), r"expert ids in \[0, E=8\), got values in \[0, 8\]"),
    ((torch.tensor([[0, -1]], dtype=torch.int32), 8, 16), r"expert ids in \[0, E=8\)"),
    ((torch.tensor([[0, 1]], dtype=torch.int64), 8, 16), "must have dtype in \\['int32'\\]"),
    ((torch.tensor([[0, 1]], dtype=torch.int32), 8, 0), "block must be an int in"),
    ((torch.tensor([[0, 1, 2]], dtype=torch.int32), 2, 4), "1 <= top_k <= E=2"),
])
def test_align_bad_input_names_the_op(args, match):
    with pytest.raises(wb.OpError, match="moe_align: " + ".*" + match):
        ALIGN(*args)


@pytest.mark.parametrize("top_k", [0, 9, 2.0, True])
def test_topk_bad_top_k(top_k):
    logits = torch.zeros(3, 8)
    with pytest.raises(wb.OpError, match=r"moe_topk: top_k must be an int in \[1, E=8\]"):
        TOPK(logits, top_k)


def test_topk_bad_logits():
    with pytest.raises(wb.OpError, match=r"moe_topk: input router_logits\[T,E\] must be 2-D"):
        TOPK(torch.zeros(3, 4, 8), 2)
    with pytest.raises(wb.OpError, match="moe_topk: input router_logits"):
        TOPK(torch.zeros(3, 8, dtype=torch.int32), 2)


def test_padding_waste():
    assert padding_waste(torch.tensor([16, 0, 32]), 16) == 0.0
    assert padding_waste(torch.tensor([1, 0, 0]), 16) == pytest.approx(15 / 16)
    assert padding_waste(torch.tensor([0, 0]), 16) == 0.0
    assert padding_waste(torch.tensor([3, 5]), 1) == 0.0


def test_model_shapes_and_their_cpu_scale():
    assert model_shape("mixtral-8x7b", 4096) == {"T": 4096, "d": 4096, "I": 14336, "E": 8, "top_k": 2}
    assert model_shape("deepseek-v3", 64, CPU_SCALE) == {"T": 64, "d": 112, "I": 32, "E": 256, "top_k": 8}
    for m in MODELS:  # the scaled shapes keep the routing (E, top_k) and are valid moe inputs
        s = model_shape(m, 2, CPU_SCALE)
        x, logits, w1, w2, k = wb.make_inputs("moe", **s)
        assert wb.get_op("moe").validate(x, logits, w1, w2, k) == s


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="this torch has no _grouped_mm")
def test_supports_gets_the_dtype_when_it_asks_for_it():
    # The grouped GEMM's rule is 16-byte row strides: I = 20 is 80 bytes in float32 (fine), 40 in float16 (not).
    v = wb.variant("moe", "torch_grouped_mm")
    shape = {"T": 3, "d": 16, "I": 20, "E": 4, "top_k": 2}
    assert v.why_not_here("float32", shape) is None
    assert "multiples of 8 in float16" in v.why_not_here("float16", shape)
    assert v.why_not_here(None, shape) is not None  # no dtype: refused when any dtype would refuse it
