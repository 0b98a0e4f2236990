"""The collectives (kernels/all_reduce, reduce_scatter, all_gather, all_to_all) through the distributed checker.

One rank pool serves the whole file (and every other test of this worker): the reports are the session's shared ones
(tests/_ops.py), so test_ops.py and this file check each variant once. What is only here: the checker's coverage
(worlds 1-5, lengths that do not divide by the world), the deadlock report and its time, the pool surviving a failed
and a hung job, the tracer's events and delays, and a learner's function defined in a notebook's ``__main__``.
"""

from __future__ import annotations

import linecache
import time

import pytest
import torch
import torch.distributed as dist

import workbench as wb
from tests._ops import variant_reports, wrong_report
from workbench import comm

COMM_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
CORRECT = [(op, v.name) for op in COMM_OPS for v in wb.variants(op)]
WRONG = [(op, v.name) for op in COMM_OPS for v in wb.known_wrong(op)]


@pytest.mark.parametrize("op,name", CORRECT, ids=[f"{o}/{n}" for o, n in CORRECT])
def test_every_variant_passes_at_worlds_1_to_5_with_ragged_lengths(op, name):
    for rep in variant_reports(op, name):
        assert rep.ok, rep.summary()
        worlds = {c.shape["world"] for c in rep.cases}
        assert worlds == {1, 2, 3, 4, 5}, worlds
        size = "N" if "N" in rep.cases[0].shape else "T"
        assert any(c.shape[size] % c.shape["world"] for c in rep.cases), "no ragged length"
        assert {c.probe for c in rep.probes} == {"drawn"}


@pytest.mark.parametrize("op,name", WRONG, ids=[f"{o}/{n}" for o, n in WRONG])
def test_known_wrong_is_caught_with_its_diagnosis(op, name):
    v = wb.variant(op, name)
    rep = wrong_report(op, name)
    assert not rep.ok and rep.diagnosis == v.expected_diagnosis, rep.summary()
    assert v.expected_diagnosis in rep.summary()
    if v.expected_diagnosis == "deadlock":  # world 1 sends nothing; world 2 hangs and is reported, 3-5 skipped
        fail = rep.telling_failure
        assert fail.shape["world"] == 2 and "rank 0 waits in send(to 1" in fail.detail
        assert "rank 1 waits in send(to 0" in fail.detail and "timed out after" in fail.detail
        assert any("not run after the deadlock" in s for s in rep.skipped)


def test_deadlock_names_every_rank_and_returns_within_the_limit():
    comm.run(_ring_shift, 3)  # the pool's processes up first: this worker may have read every report from the other's
    start = time.perf_counter()
    with pytest.raises(comm.CommTimeout) as e:
        comm.run(_sends_first, 3, faults=comm.Faults(rendezvous=True), timeout_s=1.0, label="demo")
    assert time.perf_counter() - start < 4.0
    msg = str(e.value)
    assert msg.startswith("demo, world 3: timed out after 1 s")
    for r in range(3):
        assert f"rank {r} waits in send(to {(r + 1) % 3}, 16 B)" in msg
    assert set(e.value.waits) == {0, 1, 2}
    assert comm.run(_ring_shift, 3).results[0].tolist() == [2.0] * 4  # the pool replaced the killed ranks


def test_a_failing_job_leaves_the_pool_alive():
    comm.run(_ring_shift, 2)
    started = comm.stats()["started"]
    with pytest.raises(comm.RankError, match="ValueError: rank 1 refuses") as e:
        comm.run(_fails_on_rank_1, 2)
    assert e.value.rank == 1
    assert comm.run(_ring_shift, 2).results[1].tolist() == [0.0] * 4
    assert comm.stats()["started"] == started  # no process was replaced


def test_timeline_events_and_delays():
    run = comm.run(_ring_shift, 3, faults=comm.Faults(delay_s=0.2, delay_to=(1,)))
    ev = [e for e in run.events if e.op in ("isend", "irecv", "wait", "compute")]
    assert {e.rank for e in ev} == {0, 1, 2}
    sends = [e for e in ev if e.op == "isend"]
    assert {(e.rank, e.peer, e.bytes) for e in sends} == {(0, 1, 16), (1, 2, 16), (2, 0, 16)}
    assert all(e.t_end >= e.t_start >= 0 for e in run.events)
    assert [e.note for e in ev if e.op == "compute"] == ["shift"] * 3
    # rank 0 posts its send to rank 1 0.2 s late, so rank 1 waits about that long for it
    waits = [e for e in ev if e.op == "wait" and e.note == "irecv"]
    assert len(waits) == 3 and [e.rank for e in waits if e.t_end - e.t_start >= 0.15] == [1]
    assert comm.events_table(run.events)[0].keys() >= {"rank", "op", "peer", "bytes", "t_start", "t_end"}
    assert "gloo on this CPU" in run.where


def test_late_plan_shows_a_read_before_wait_every_time():
    for _ in range(2):
        (y0, _), _ = comm.run(_read_early, 2, faults=comm.Faults(late=True)).results
        assert torch.isnan(y0).all()  # the message lands only at wait(): the early read sees the scribble
    strict = comm.Faults(late=True, reorder=True, rendezvous=True)
    assert strict.describe() == "late, rendezvous, reorder"
    run = comm.run(_ring_shift, 4, faults=strict)  # correct code survives every plan
    assert [y.tolist() for y in run.results] == [[float((r - 1) % 4)] * 4 for r in range(4)]


LEARNER_SRC = '''
import torch.distributed as tdist

def my_rs(x, group=None):
    world, rank = tdist.get_world_size(group), tdist.get_rank(group)
    parts = list(torch.tensor_split(x.clone(), world))
    right, left = (rank + 1) % world, (rank - 1) % world
    for s in range(world - 1):
        send, recv = (rank - s - 1) % world, (rank - s - 2) % world
        got = torch.empty_like(parts[recv])
        handles = [tdist.irecv(got, left, group=group), tdist.isend(parts[send], right, group=group)]
        for h in handles:
            h.wait()
        parts[recv] = add(parts[recv], got)
    return parts[rank]

def add(a, b):
    return a + b

def bad_rs(x, group=None):
    return my_rs(x, group) * SCALE

SCALE = 2.0
'''


def _notebook_cell() -> dict:
    """Define the learner's functions the way a Jupyter cell does: in __main__, source only in linecache."""
    name = "<ipython-input-comm-1>"
    linecache.cache[name] = (len(LEARNER_SRC), None, LEARNER_SRC.splitlines(True), name)
    ns = {"__name__": "__main__", "torch": torch}
    exec(compile(LEARNER_SRC, name, "exec"), ns)  # noqa: S102
    return ns


def test_a_function_defined_in_a_notebook_cell_is_checked_by_source():
    ns = _notebook_cell()
    assert ns["my_rs"].__module__ == "__main__"
    shapes = [{"world": w, "N": n} for w, n in ((1, 5), (3, 7), (5, 3))]
    rep = wb.check(ns["my_rs"], "reduce_scatter", shapes=shapes, seeds=(0,), probes=False)
    assert rep.ok, rep.summary()
    bad = wb.check(ns["bad_rs"], "reduce_scatter", shapes=shapes, seeds=(0,), probes=False)
    assert not bad.ok and bad.diagnosis == "scale", bad.summary()


def test_bad_calls_are_refused_clearly():
    with pytest.raises(ValueError, match="world must be an int in 1..5"):
        comm.run(_ring_shift, 6)
    with pytest.raises(ValueError, match="delay_s > 0"):
        comm.Faults(delay_messages=(0,))
    with pytest.raises(wb.OpError, match="all_reduce: x must be 1-D"):
        wb.variant("all_reduce", "ring")(torch.zeros(2, 2))


def test_timing_is_labelled_and_bench_refers_to_it(capsys):
    from benchmarks.comm_busbw import main as busbw_main
    from workbench.comm_time import table, time_collective

    rows = time_collective("ring", "all_reduce", world=3, sizes=[30], repeats=2)
    (r,) = rows
    assert r["bytes"] == 120 and r["t_s"] > 0 and "gloo on this CPU" in r["where"]
    assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 4 / 3)  # 2(n-1)/n at n = 3
    assert table(rows).startswith("gloo on this CPU")
    with pytest.raises(ValueError, match="all_reduce is a collective.*comm_time"):
        wb.bench(wb.variant("all_reduce", "ring"), N=8, world=2)
    if torch.cuda.device_count() < 2:  # one GPU has no peer: the NCCL benchmark measures nothing and says so
        assert busbw_main([]) == 2
        assert "nothing was measured" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ rank functions


def _sends_first(rank, world, dev):
    x = torch.ones(4)
    dist.send(x, (rank + 1) % world)
    dist.recv(x, (rank - 1) % world)
    return x


def _ring_shift(rank, world, dev):
    x, y = torch.full((4,), float(rank)), torch.empty(4)
    r = dist.irecv(y, (rank - 1) % world)
    s = dist.isend(x, (rank + 1) % world)
    r.wait()
    s.wait()
    with comm.span("compute", note="shift"):
        y = y + 0
    return y


def _fails_on_rank_1(rank, world, dev):
    if rank == 1:
        raise ValueError("rank 1 refuses")
    return rank


def _read_early(rank, world, dev):
    x, y = torch.full((4,), float(rank)), torch.zeros(4)
    r = dist.irecv(y, (rank - 1) % world)
    s = dist.isend(x, (rank + 1) % world)
    early = y.clone()
    r.wait()
    s.wait()
    return early, y
