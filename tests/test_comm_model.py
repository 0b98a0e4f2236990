"""The cost model of collectives: nccl-tests' busbw, the alpha-beta model's steps and bytes, the napkin math."""

from __future__ import annotations

import math

import pytest

from workbench import comm_model as cm
from workbench import hardware


def test_bus_factors_are_nccl_tests_and_busbw_of_a_perfect_ring_is_the_link():
    assert cm.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert cm.bus_factor(op, 4) == pytest.approx(3 / 4)
    assert cm.bus_factor("broadcast", 8) == 1.0 and cm.bus_factor("all_reduce", 1) == 0.0
    # 1 GB in 2 ms: algbw 500 GB/s; busbw for 8 ranks x 14/8
    assert cm.algbw(1e9, 2e-3) == pytest.approx(500)
    assert cm.busbw("all_reduce", 1e9, 2e-3, 8) == pytest.approx(875)
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        cm.bus_factor("allreduce", 4)
    with pytest.raises(ValueError, match="world must be an int >= 1"):
        cm.bus_factor("all_reduce", 0)
    with pytest.raises(ValueError, match="seconds must be > 0"):
        cm.algbw(10, 0)


def test_links_are_per_direction_with_sources():
    nv, ib = hardware.get_link("nvlink4"), hardware.get_link("ib_ndr")
    assert nv.bandwidth_gbs == 450 and "900 GB/s" in nv.source.note and "each way" in nv.source.note
    assert ib.bandwidth_gbs == 400 / 8  # 400 Gb/s
    assert "assumption" in nv.latency_source.document
    with pytest.raises(KeyError, match="known links: nvlink4, ib_ndr"):
        hardware.get_link("nvlink5")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_ring_steps_and_bytes(n):
    steps = cm.schedule("ring", n, 1200.0)
    assert len(steps) == 2 * (n - 1)
    assert all(st.nbytes == pytest.approx(1200 / n) and len(st.pairs) == n for st in steps)
    assert [st.reduce for st in steps] == [True] * (n - 1) + [False] * (n - 1)
    assert {dst - src for st in steps for src, dst in st.pairs} <= {1, 1 - n}  # each rank to its right neighbour
    m = cm.all_reduce_model("ring", 1e12, n, "nvlink4")
    assert m.step_bytes == pytest.approx(2 * (n - 1) / n * 1e12)
    assert m.busbw_gbs == pytest.approx(450, rel=1e-3)  # large messages: busbw -> the link's bandwidth
    assert m.label == "model"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_halving_doubling_pairs_partners_and_moves_the_rings_bytes(n):
    steps = cm.schedule("halving_doubling", n, 1024.0)
    p = 1 << (n.bit_length() - 1)
    log = int(math.log2(p))
    assert len(steps) == 2 * log + (2 if n > p else 0)
    core = steps[1:-1] if n > p else steps
    assert [st.nbytes for st in core] == [1024 / 2 ** (k + 1) for k in range(log)] + \
        [1024 / 2 ** (k + 1) for k in reversed(range(log))]
    for st in core:  # partners exchange: every pair appears in both directions
        assert set(st.pairs) == {(b, a) for a, b in st.pairs}
    if n == p:
        m = cm.all_reduce_model("halving_doubling", 8e9, n)
        assert m.step_bytes == pytest.approx(2 * (n - 1) / n * 8e9)  # the ring's bytes in 2 log2 n steps


def test_naive_goes_through_rank_0_one_message_at_a_time():
    steps = cm.schedule("naive", 4, 100.0)
    assert [st.pairs for st in steps] == [((1, 0),), ((2, 0),), ((3, 0),), ((0, 1),), ((0, 2),), ((0, 3),)]
    m = cm.all_reduce_model("naive", 1e9, 4, "ib_ndr")
    assert m.seconds == pytest.approx(6 * (6e-6 + 1e9 / 50e9))


def test_pipelined_ring_pays_more_alphas_but_hides_the_reduction():
    plain = cm.all_reduce_model("ring", 1e9, 4, reduce_gbs=1000.0)
    piped = cm.all_reduce_model("ring_pipelined", 1e9, 4, reduce_gbs=1000.0, chunks=8)
    assert piped.steps == 8 * plain.steps and piped.alpha_s == pytest.approx(8 * plain.alpha_s)
    assert piped.reduce_s == pytest.approx(plain.reduce_s / 8)
    assert piped.seconds < plain.seconds
    tiny = cm.all_reduce_model("ring_pipelined", 64, 4, reduce_gbs=1000.0, chunks=8)
    assert tiny.seconds > cm.all_reduce_model("ring", 64, 4, reduce_gbs=1000.0).seconds  # alphas dominate


def test_tree_beats_the_ring_on_small_messages_only():
    small, big = 1024, 1 << 30
    assert cm.all_reduce_model("tree", small, 8).seconds < cm.all_reduce_model("ring", small, 8).seconds
    assert cm.all_reduce_model("tree", big, 8).seconds > cm.all_reduce_model("ring", big, 8).seconds
    with pytest.raises(ValueError, match="closed form"):
        cm.schedule("tree", 4, 10)


def test_model_events_follow_the_schedule():
    ev = cm.model_events("ring", 4, 4e6, "nvlink4", reduce_gbs=1000)
    sends = [e for e in ev if e["op"] == "send"]
    assert len(sends) == 6 * 4 and all(e["peer"] == (e["rank"] + 1) % 4 for e in sends)
    comp = [e for e in ev if e["op"] == "compute"]
    assert len(comp) == 3 * 4  # a reduction after each reduce-scatter step, on every rank
    assert max(e["t_end"] for e in ev) == pytest.approx(cm.all_reduce_model("ring", 4e6, 4, reduce_gbs=1000).seconds)


def test_fit_recovers_alpha_and_beta():
    a, b = 40e-6, 1 / 2e9
    sizes = [1e3, 1e4, 1e5, 1e6]
    assert cm.fit_alpha_beta(sizes, [a + s * b for s in sizes]) == pytest.approx((a, b))
    with pytest.raises(ValueError, match=">= 2 distinct sizes"):
        cm.fit_alpha_beta([1e3, 1e3], [1.0, 1.0])


def test_napkin_7b_gradients_and_tp_crossover():
    nv = cm.grad_sync_model(7, 8, "nvlink4")
    ib = cm.grad_sync_model(7, 8, "ib_ndr")
    assert nv.seconds == pytest.approx(2 * 7 / 8 * 14e9 / 450e9 + 14 * 3e-6)
    assert ib.seconds / nv.seconds == pytest.approx(9, rel=0.01)
    h = cm.tp_crossover_hidden(8, "H200", "nvlink4")
    assert h == pytest.approx(7 * 2 * 989.5e12 / (4 * 450e9))
    below = cm.tp_allreduce_vs_gemm(16384, int(h * 0.5), 8)
    above = cm.tp_allreduce_vs_gemm(16384, int(h * 2), 8)
    assert below["ratio"] > 1 > above["ratio"]
    with pytest.raises(ValueError, match="tp must be an int >= 2"):
        cm.tp_allreduce_vs_gemm(16, 1024, 1)


def test_ring_attention_model_overlap_and_causal_imbalance():
    blocking = cm.ring_attention_events(32768, 32, 128, 8, overlapped=False)
    overlapped = cm.ring_attention_events(32768, 32, 128, 8, overlapped=True)
    end = lambda ev: max(e["t_end"] for e in ev)  # noqa: E731
    assert end(overlapped) < end(blocking)
    compute = [sum(e["t_end"] - e["t_start"] for e in overlapped if e["rank"] == r and e["op"] == "compute")
               for r in range(8)]
    assert compute[7] == pytest.approx(compute[0] * 15)  # rank 0: half a block; rank 7: 7 full + half
    rank0 = [e for e in blocking if e["rank"] == 0]
    xfer = max(e["t_end"] - e["t_start"] for e in rank0 if e["op"] == "recv")
    own = compute[0] + 7 * xfer  # what rank 0 would take alone: it waits for its busier neighbours' blocks
    assert max(e["t_end"] for e in rank0) > 2 * own
    assert any(e["op"] == "wait" for e in rank0)
    sends = [e for e in blocking if e["op"] == "send" and e["rank"] == 3]
    assert len(sends) == 7 and all(e["peer"] == 4 for e in sends)
    with pytest.raises(ValueError, match="equal shards"):
        cm.ring_attention_events(100, 1, 8, 3)
