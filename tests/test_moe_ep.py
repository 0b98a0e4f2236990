"""Expert-parallel moe (kernels/moe/ep.py): 2 gloo ranks against the float64 reference, plus the bookkeeping.

Spawning ranks costs seconds (each imports torch), so every correctness case runs in one spawned group.
"""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from kernels.moe.ep import _judge, plan_dispatch, run_ep_check, run_ep_checks
from kernels.moe.reference import route

CASES = {
    "uneven": {"T": 17, "d": 33, "I": 20, "E": 8, "top_k": 2},  # T odd: ranks hold 9 and 8 tokens
    "one_token": {"T": 1, "d": 16, "I": 16, "E": 4, "top_k": 2},  # rank 1 has no token at all
    "one_expert": {"T": 9, "d": 16, "I": 24, "E": 4, "top_k": 1, "case": "one_expert"},  # rank 1 receives nothing
    "top_k_is_E": {"T": 5, "d": 16, "I": 16, "E": 4, "top_k": 4},
    "bf16_raw_weights": {"T": 12, "d": 32, "I": 32, "E": 4, "top_k": 2, "dtype": torch.bfloat16,
                         "renormalize": False},
}


@pytest.fixture(scope="module")
def results():
    return dict(zip(CASES, run_ep_checks(list(CASES.values()), world=2, backend="gloo", timeout_s=90), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_ep_matches_reference(results, name):
    r = results[name]
    assert r["ok"], r
    rows = r["T"] * r["top_k"]  # every (token, slot) row goes out once and comes back once
    assert sum(map(sum, r["sent_rows"])) == sum(map(sum, r["recv_rows"])) == rows
    # what rank a sent to rank b is what rank b received from rank a
    assert all(r["sent_rows"][a][b] == r["recv_rows"][b][a] for a in range(2) for b in range(2))
    assert r["bytes"]["combine"] == r["T"] * r["bytes_per_token_each_way"]  # top_k * d * elem_size per token
    assert r["bytes"]["dispatch"] == r["bytes"]["combine"] + 4 * rows  # + an int32 expert id per row


def test_ep_empty_ranks(results):
    assert results["one_token"]["tokens_per_rank"] == [1, 0]
    assert results["one_expert"]["recv_rows"][1] == [0, 0]  # experts 2, 3 get no token: rank 1 computes nothing


def test_plan_dispatch_split_sizes():
    ids = torch.tensor([[3, 0], [1, 2], [2, 3]])  # E = 4 over 2 ranks: experts 0,1 on rank 0, 2,3 on rank 1
    plan = plan_dispatch(ids, experts_per_rank=2, world=2)
    assert plan.send_counts.tolist() == [2, 4]
    assert plan.order.tolist() == [1, 2, 0, 3, 4, 5]  # stable: token order kept within a destination
    assert plan.local_ids.tolist() == [0, 1, 1, 0, 0, 1]
    assert plan.local_ids.dtype == torch.int32 and plan.send_counts.dtype == torch.int64
    _, ids = route(torch.zeros(0, 8), 2)  # a rank without tokens sends nothing
    assert plan_dispatch(ids, 4, 2).send_counts.tolist() == [0, 0]


def test_ep_bad_inputs_fail_in_the_caller():
    with pytest.raises(ValueError, match="do not split evenly"):
        run_ep_check(world=2, E=5)
    with pytest.raises(ValueError, match="top_k"):  # the contract's validate runs before any rank starts
        run_ep_check(world=2, E=4, top_k=5)


def test_ep_timeout_kills_the_ranks():
    with pytest.raises(TimeoutError, match="did not finish within"):
        run_ep_check(world=2, T=4, timeout_s=0.5)  # cannot even start torch in 0.5 s


def test_ep_judged_by_the_checker_with_a_diagnosis():
    """A gathered output goes through the checker's comparison: a NaN fails, named and located."""
    shape = {"T": 6, "d": 8, "I": 8, "E": 4, "top_k": 2}
    job = {"shape": shape, "dtype": torch.float32, "seed": 0, "case": "random", "renormalize": True}
    inputs = wb.make_inputs("moe", dtype=torch.float32, seed=0, **shape)
    right = wb.reference("moe")(*inputs).float()
    stats = {"sent_rows": [3, 3], "recv_rows": [3, 3], "bytes_counts": 16, "bytes_dispatch": 0, "bytes_combine": 0}

    def judge(out):
        ranks = [{"out": out[:3], "stats": stats, "ep_s": 1e-3}, {"out": out[3:], "stats": stats, "ep_s": 1e-3}]
        return _judge(job, inputs, ranks, "gloo", 0.0)

    assert judge(right)["ok"] and judge(right)["diagnosis"] is None
    nan = right.clone()
    nan[2, 5] = float("nan")  # the old comparison passed no NaN either, but named nothing
    r = judge(nan)
    assert not r["ok"] and r["diagnosis"] == "computed_nan" and "(2, 5)" in r["result"], r["result"]
