"""The CPU engine's synccheck (checked launches): barriers only part of a block reaches and warp collectives whose
masks name lanes that exited or are elsewhere are reported with kernel, block, thread and line; correct kernels stay
clean; unchecked launches of the same kernels never hang."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="CPU-engine behaviour")

CU = Path(__file__).parent / "cuda"
SRC = CU / "sync_bugs.cu"


def line_of(text: str) -> int:
    return next(i for i, ln in enumerate(SRC.read_text().splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def sync():
    from workbench import cuda

    return {"checked": cuda.RawModule(code=SRC, checked=True).compile(), "plain": cuda.RawModule(code=SRC).compile()}


def synccheck(sync, name, grid, block, args):
    """Launch ``name`` checked; return the SynccheckError it raises."""
    from workbench.cuda import SynccheckError

    with pytest.raises(SynccheckError) as ei:
        sync["checked"].get_function(name)(grid, block, args)
    e = ei.value
    assert e.tool == "synccheck" and e.records and all(r["kernel"] == name for r in e.records)
    assert f"checked launch of kernel {name!r}" in str(e)
    return e


def test_barrier_reached_by_part_of_the_block(sync):
    e = synccheck(sync, "half_barrier", (1,), (64,), (np.zeros(64, np.float32),))
    r = e.records[0]
    assert r["kind"] == "partial barrier" and r["exited"] == 48 and r["line"] == line_of("if (threadIdx.x < 16)")
    assert r["block"] == (0, 0, 0) and r["thread"] == (0, 0, 0) and r["other"]["thread"] == (16, 0, 0)
    assert "reached by only part of the block" in str(e) and f"sync_bugs.cu:{r['line']}" in str(e)


def test_early_return_before_a_barrier_is_reported_for_the_tail_block_only(sync):
    x, out = np.ones(300, np.float32), np.zeros(3, np.float32)
    e = synccheck(sync, "early_return_sum", (3,), (128,), (x, out, np.int32(300)))
    assert [r["block"] for r in e.records] == [(2, 0, 0)] and e.records[0]["exited"] == 84
    assert e.records[0]["line"] == line_of("// the tail block's exited threads never arrive")
    sync["checked"].get_function("early_return_sum")((2,), (128,), (x, out, np.int32(256)))  # no tail: clean


def test_shuffle_whose_mask_names_exited_lanes(sync):
    """llm.c's online-softmax bug: a full-mask __shfl_down_sync inside `if (lane < n)`."""
    x, out = np.arange(32, dtype=np.float32), np.zeros(1, np.float32)
    e = synccheck(sync, "partial_warp_sum", (1,), (32,), (x, out, np.int32(20)))
    r = e.records[0]
    assert r["kind"] == "exited lane" and r["mask"] == 0xFFFFFFFF and r["lanes"] == [20]
    assert r["line"] == line_of("__shfl_down_sync(0xffffffffu, v, off);  // BUG") and r["thread"] == (0, 0, 0)
    # lanes 20..31 exit while the first shuffle waits for them (12), then each of the 4 later shuffles names them
    assert r["other"]["thread"] == (20, 0, 0) and e.total == 12 + 4
    assert "names lane(s) [20], which exited without taking part" in str(e)


def test_lanes_at_different_shuffles_are_not_converged(sync):
    e = synccheck(sync, "split_shuffles", (1,), (32,), (np.arange(32, dtype=np.float32), np.zeros(32, np.float32)))
    r = e.records[0]
    first = line_of("v = __shfl_xor_sync(0xffffffffu, v, 1);")
    second = line_of("v = __shfl_xor_sync(0xffffffffu, v, 2);")
    assert r["kind"] == "divergent warp" and r["line"] == second and r["thread"] == (8, 0, 0)
    assert r["other"] == {"thread": (0, 0, 0), "line": first, "file": str(SRC)}


def test_mask_that_leaves_out_the_calling_lane(sync):
    e = synccheck(sync, "mask_without_me", (1,), (32,), (np.arange(32, dtype=np.float32), np.zeros(32, np.float32)))
    assert {r["kind"] for r in e.records} == {"invalid mask"}
    assert sorted(x for r in e.records for x in r["lanes"]) == [16]  # reported once per call site, counted
    assert e.total == 16 and e.records[0]["mask"] == 0xFFFF and e.records[0]["thread"] == (16, 0, 0)


def test_barrier_against_shuffle_is_a_deadlock_checked_and_unchecked(sync):
    from workbench.cuda import KernelLaunchError

    out = np.zeros(64, np.float32)
    e = synccheck(sync, "barrier_vs_shuffle", (1,), (64,), (out,))
    r = e.records[0]
    assert r["kind"] == "deadlock" and r["waiting_at_barrier"] == 32
    assert r["line"] == line_of("% 32 < 16) __syncthreads();")
    assert r["other"]["thread"] == (16, 0, 0) and r["other"]["line"] == line_of("v = __shfl_sync(0xffffffffu, v, 0);")
    with pytest.raises(KernelLaunchError, match=r"barrier_vs_shuffle.*deadlock in block \(0,0,0\)"):
        sync["plain"].get_function("barrier_vs_shuffle")((1,), (64,), (out,))


@pytest.mark.parametrize("name, grid, block, make", [
    ("guarded_sum", (3,), (128,), lambda: (np.ones(300, np.float32), np.zeros(3, np.float32), np.int32(300))),
    ("full_warp_sum", (1,), (32,), lambda: (np.arange(32, dtype=np.float32), np.zeros(1, np.float32), np.int32(20))),
    ("branch_mask", (1,), (32,), lambda: (np.arange(32, dtype=np.float32), np.zeros(32, np.float32))),
])
def test_correct_kernels_are_clean(sync, name, grid, block, make):
    args = make()
    sync["checked"].get_function(name)(grid, block, args)
    if name == "guarded_sum":
        np.testing.assert_array_equal(args[1], [128, 128, 44])
    if name == "full_warp_sum":
        assert args[1][0] == np.arange(20).sum()


@pytest.mark.parametrize("name, block, make", [
    ("half_barrier", 64, lambda: (np.zeros(64, np.float32),)),
    ("partial_warp_sum", 32, lambda: (np.arange(32, dtype=np.float32), np.zeros(1, np.float32), np.int32(20))),
    ("split_shuffles", 32, lambda: (np.arange(32, dtype=np.float32), np.zeros(32, np.float32))),
    ("mask_without_me", 32, lambda: (np.arange(32, dtype=np.float32), np.zeros(32, np.float32))),
])
def test_unchecked_launches_of_the_bugs_finish(sync, name, block, make):
    """Unchecked, these run to the end (as they usually do on a GPU, with an unspecified result); none hangs."""
    sync["plain"].get_function(name)((1,), (block,), make())
