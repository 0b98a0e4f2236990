"""workbench/distributed.py: the spawn harness's pieces that need no spawned process (its runs: test_moe_ep.py)."""

from __future__ import annotations

import queue

import pytest
import torch

from workbench import distributed


def _never_called(rank, world, device):
    raise AssertionError("the rendezvous should fail first")


def test_rank_reports_its_traceback():
    q: queue.Queue = queue.Queue()
    with pytest.raises(SystemExit):  # port -1 is no port: the rendezvous fails at once
        distributed.rank_main(0, 2, -1, "gloo", _never_called, (), 1.0, q)
    kind, rank, text = q.get_nowait()
    assert (kind, rank) == ("error", 0) and "Traceback" in text


def test_reports_round_trip_with_empty_and_low_precision_tensors():
    report = {"out": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "none": torch.empty(0, 4),
              "rows": [[1, 2], (3, torch.tensor([7], dtype=torch.int32))], "ms": 0.5}
    back = distributed.from_bytes(distributed.to_bytes(report))
    assert torch.equal(back["out"], report["out"]) and back["out"].dtype == torch.bfloat16
    assert back["none"].shape == (0, 4) and back["ms"] == 0.5 and back["rows"][0] == [1, 2]
    assert isinstance(back["rows"][1], tuple) and back["rows"][1][1].tolist() == [7]


def test_backend_choice_is_refused_clearly():
    assert distributed.pick_backend("gloo", 2) == "gloo"
    with pytest.raises(ValueError, match="backend must be 'gloo', 'nccl' or None"):
        distributed.pick_backend("mpi", 2)
    if torch.cuda.device_count() < 64:
        with pytest.raises(RuntimeError, match="backend 'nccl' needs 64 GPUs"):
            distributed.pick_backend("nccl", 64)
    with pytest.raises(ValueError, match="world must be >= 1"):
        distributed.run_ranks(_never_called, 0)
