"""Ring attention (kernels/ring_attention): every variant on 1-4 gloo ranks against full float64 attention, causal
included, under the fault plan that makes a missing wait or a deadlock visible; the known-wrong merge named; the
overlapped ring's transfer in flight during its compute (the timeline)."""

from __future__ import annotations

import pytest
import torch

import kernels.ring_attention  # noqa: F401  (registers the contract)
import workbench as wb
from kernels.ring_attention import reference as R
from kernels.ring_attention._ring import call_variant
from workbench import comm
from workbench.registry import OpError

VARIANTS = ("torch_allgather", "ring_blocking", "ring_overlapped")
STRICT = comm.Faults(late=True, rendezvous=True)


def _run(name, world, causal, faults=STRICT, dtype=torch.float32, shape=None):
    sizes = shape or {"world": world, "B": 1, "H": 2, "S": 5, "D": 8}
    ins = R.make(sizes, dtype, 0, torch.device("cpu"))
    run = comm.run(call_variant, world, "ring_attention", name, ins, {"causal": causal}, faults=faults,
                   timeout_s=30, label=f"ring_attention/{name}")
    return ins, run


@pytest.mark.parametrize("name", VARIANTS)
def test_variants_pass_the_distributed_checker(name):
    """Worlds 1-5, causal and not, under the checker's two fault plans (late landing, rendezvous sends)."""
    report = wb.check(wb.variant("ring_attention", name), "ring_attention")
    assert report.ok, report.summary()
    assert {r.shape["world"] for r in report.runs} >= {1, 2, 3, 4}
    per_shape = [r for r in report.runs if r.shape == R.CHECK_SHAPES[2] and not r.probe]
    assert len(per_shape) == 2 * len(R.DTYPES)  # causal False and True, each dtype


def test_causal_on_four_ranks_matches_full_attention():
    ins, run = _run("ring_overlapped", 4, True)
    for out, want in zip(run.results, R.reference(ins, causal=True), strict=True):
        assert float((out.double() - want).abs().max()) < 2e-5


def test_the_wrong_merge_fails_the_checker_with_its_diagnosis():
    report = wb.check(wb.variant("ring_attention", "wrong_merge_no_rescale"), "ring_attention")
    assert not report.ok and report.diagnosis == "online_rescale", report.summary()


def test_bf16_within_tolerance():
    ins, run = _run("ring_overlapped", 3, True, dtype=torch.bfloat16)
    atol, rtol = R.tolerance(torch.bfloat16, {})
    for out, want in zip(run.results, R.reference(ins, causal=True), strict=True):
        assert out.dtype == torch.bfloat16
        assert torch.allclose(out.double(), want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("causal", [False, True])
def test_merge_without_rescale_is_wrong_and_named(causal):
    ins, run = _run("wrong_merge_no_rescale", 3, causal)
    ref = R.reference(ins, causal=causal)
    assert max(float((o.double() - r).abs().max()) for o, r in zip(run.results, ref, strict=True)) > 0.1
    assert R.explain(run.results, ref, ins, {"causal": causal}, 2e-5, 2e-5) == "online_rescale"
    ok_ins, ok = _run("ring_overlapped", 3, causal)
    assert R.explain(ok.results, R.reference(ok_ins, causal=causal), ok_ins, {"causal": causal}, 2e-5, 2e-5) is None
    _, one = _run("wrong_merge_no_rescale", 1, causal)  # one block: nothing to merge, nothing to get wrong
    assert torch.allclose(one.results[0].double(), R.reference(R.make(
        {"world": 1, "B": 1, "H": 2, "S": 5, "D": 8}, torch.float32, 0, torch.device("cpu")), causal=causal)[0],
        atol=2e-5)


def _spans(run, rank):
    ev = sorted((e for e in run.events if e.rank == rank), key=lambda e: e.t_start)
    return [(e.op, e.t_start, e.t_end) for e in ev]


def test_overlapped_posts_before_computing_and_blocking_waits_first():
    """Rank 0, step 0: the overlapped ring posts isend/irecv, computes, then waits; the blocking ring computes, then
    posts and waits before the next compute (the isend follows the compute)."""
    _, over = _run("ring_overlapped", 3, False, faults=comm.Faults())
    ops = [op for op, _, _ in _spans(over, 0)]
    assert ops[:3] == ["isend", "irecv", "compute"] and ops[3] == "wait", ops
    _, block = _run("ring_blocking", 3, False, faults=comm.Faults())
    ops = [op for op, _, _ in _spans(block, 0)]
    assert ops[:3] == ["compute", "isend", "irecv"] and ops[3:5] == ["wait", "wait"], ops
    assert ops.count("compute") == 3 and ops.count("isend") == 2  # world - 1 transfers


def test_causal_load_imbalance_is_in_the_masks():
    assert [R.block_mask(0, s, True) for s in range(3)] == ["diagonal", "skip", "skip"]
    assert [R.block_mask(2, s, True) for s in range(3)] == ["full", "full", "diagonal"]
    assert R.ring_order(1, 4) == [1, 0, 3, 2]


def test_merge_of_two_halves_is_full_attention():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    o1, l1 = R.block_attention(q, k[:, :, :2], v[:, :, :2], R.FULL)
    o2, l2 = R.block_attention(q, k[:, :, 2:], v[:, :, 2:], R.FULL)
    o, lse = R.merge(*R.merge(*R.empty_state(q), o1, l1), o2, l2)
    full, lfull = R.block_attention(q, k, v, R.FULL)
    assert torch.allclose(o, full, atol=1e-6) and torch.allclose(lse, lfull, atol=1e-6)
    skip = R.block_attention(q, k, v, R.SKIP)
    assert torch.equal(R.merge(o, lse, *skip)[0], o)  # an all-masked block changes nothing


def test_bad_inputs_name_the_op():
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(OpError, match="ring_attention: k and v must have q's shape"):
        R.validate(q, torch.zeros(1, 2, 3, 8), q)
    with pytest.raises(OpError, match="ring_attention: inputs must share one dtype"):
        R.validate(q, q.half(), q)
