"""Tensor- and data-parallel pieces of notebook 08 on gloo ranks (one rank pool for both, spawned once):

* tp_mlp (kernels/tp_mlp): Megatron's column-then-row split against the dense float64 MLP at worlds 1-4, ragged
  feature shards included; the missing all-reduce named ``partial_sum``.
* the DDP-style step (kernels/ddp_overlap): gradients synced after the backward and overlapping it, both equal to
  float64 autograd's; the overlapped step's first all-reduce starts before its backward ends.
"""

from __future__ import annotations

import pytest
import torch

import kernels.tp_mlp  # noqa: F401  (registers the contract)
import workbench as wb
from kernels.ddp_overlap import step as ddp
from kernels.ring_attention._ring import call_variant
from kernels.tp_mlp import reference as T
from workbench import comm
from workbench.registry import OpError

STRICT = comm.Faults(late=True, rendezvous=True)


def _run(name, world, dtype=torch.float32, **sizes):
    shape = {"world": world, "T": 5, "H": 16, "F": 30, **sizes}
    ins = T.make(shape, dtype, 0, torch.device("cpu"))
    return ins, comm.run(call_variant, world, "tp_mlp", name, ins, {}, faults=STRICT, timeout_s=30)


def test_megatron_passes_the_distributed_checker_and_the_shards_are_ragged():
    report = wb.check(wb.variant("tp_mlp", "megatron"), "tp_mlp")
    assert report.ok, report.summary()
    assert {r.shape["world"] for r in report.runs} >= {1, 2, 3, 4}
    ins = T.make({"world": 4, "T": 2, "H": 8, "F": 30}, torch.float32, 0, torch.device("cpu"))
    assert [tuple(w1.shape) for _, w1, _ in ins] == [(8, 8), (8, 8), (8, 7), (8, 7)]
    wrong = wb.check(wb.variant("tp_mlp", "wrong_no_all_reduce"), "tp_mlp")
    assert not wrong.ok and wrong.diagnosis == "partial_sum", wrong.summary()


def test_bf16_within_tolerance_and_all_ranks_agree():
    ins, run = _run("megatron", 4, torch.bfloat16, T=3, H=32, F=64)
    atol, rtol = T.tolerance(torch.bfloat16, {})
    for out, want in zip(run.results, T.reference(ins), strict=True):
        assert out.dtype == torch.bfloat16 and torch.allclose(out.double(), want, atol=atol, rtol=rtol)
        assert torch.equal(out, run.results[0])  # one all-reduce: every rank holds the same bits


def test_missing_all_reduce_is_named_partial_sum():
    ins, run = _run("wrong_no_all_reduce", 3)
    ref = T.reference(ins)
    assert max(float((o.double() - r).abs().max()) for o, r in zip(run.results, ref, strict=True)) > 0.05
    assert T.explain(run.results, ref, ins, {}, 1e-4, 1e-4) == "partial_sum"
    ok_ins, ok = _run("megatron", 3)
    assert T.explain(ok.results, T.reference(ok_ins), ok_ins, {}, 1e-4, 1e-4) is None
    _, one = _run("wrong_no_all_reduce", 1)  # one rank: its partial sum is y, the bug hides
    assert torch.allclose(one.results[0].double(), T.reference(T.make(
        {"world": 1, "T": 5, "H": 16, "F": 30}, torch.float32, 0, torch.device("cpu")))[0], atol=1e-5)


def test_bad_shards_name_the_op():
    x, w1, w2 = torch.zeros(3, 8), torch.zeros(8, 4), torch.zeros(4, 8)
    with pytest.raises(OpError, match=r"tp_mlp: w2_shard must be \[F_r, H\] = \[4, 8\]"):
        T.validate(x, w1, torch.zeros(5, 8))
    with pytest.raises(OpError, match="tp_mlp: w1_shard"):
        T.validate(x, torch.zeros(7, 4), w2)


def test_ddp_sync_after_and_overlapped_give_the_reference_gradients():
    weights, data = ddp.make(3, 8, 32, 6)
    ref = ddp.reference_grads(weights, data)
    for fn in (ddp.sync_after, ddp.sync_overlapped):
        run = comm.run(fn, 3, weights, data, 2, timeout_s=30)
        for rank, grads in enumerate(run.results):
            for layer, (g, r) in enumerate(zip(grads, ref, strict=True)):
                err = float((g.double() - r).abs().max())
                assert err < 1e-5, f"{fn.__name__} rank {rank} layer {layer}: error {err:.1e}"
    assert ddp.buckets(5, 2) == [[4, 3], [2, 1], [0]]


def test_ddp_overlapped_sends_during_the_backward():
    weights, data = ddp.make(2, 8, 32, 6)
    over = comm.run(ddp.sync_overlapped, 2, weights, data, 2, timeout_s=30)
    after = comm.run(ddp.sync_after, 2, weights, data, 2, timeout_s=30)
    for run, overlapped in ((over, True), (after, False)):
        ev = [e for e in run.events if e.rank == 0]
        last_compute = max(e.t_end for e in ev if e.op == "compute")
        first_reduce = min(e.t_start for e in ev if e.op == "all_reduce")
        assert (first_reduce < last_compute) == overlapped
        assert sum(e.op == "all_reduce" for e in ev) == 3  # 6 layers in buckets of 2
