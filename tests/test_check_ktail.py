"""The checker's k_tail diagnosis, and the one headline that implement drills and exercises lead with.

k_tail is recomputed, not guessed from a pattern: the reference without the last partial K tile (each power-of-two
tile size with a whole tile before the tail) must equal what the kernel returned. The functions here are plain
torch stand-ins for a kernel's K loop, checked at tiny shapes, so each test takes well under a second.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import workbench as wb
from workbench.checker import DIAGNOSES, contraction_axes, k_tail_lengths
from workbench.practice import store as progress_store
from workbench.practice.implement import failure_headline


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Drill attempts go to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


def gemm_whole_tiles(a, b, tile=16):
    """A K loop over whole ``tile``-wide steps only: the last K % tile terms of every dot are dropped."""
    k = a.shape[1] // tile * tile
    return (a[:, :k].double() @ b[:k].double()).to(a.dtype)


def gemm_skips_first_terms(a, b):
    """Drops K % 16 terms at the start of K, not at its end: wrong, but not the tail."""
    r = a.shape[1] % 16
    return (a[:, r:].double() @ b[r:].double()).to(a.dtype)


def gemm_zeros(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)


def fp8_whole_tiles(a, bt, scale_a, scale_b):
    k = a.shape[1] // 32 * 32
    return ((a[:, :k].double() * scale_a.double()) @ (bt[:, :k].double() * scale_b.double()).T).to(torch.bfloat16)


TAIL = {"M": 5, "N": 7, "K": 40}  # two whole 16-wide tiles and a tail of 8
NO_WHOLE_TILE = {"M": 5, "N": 3, "K": 9}


def test_the_contraction_is_read_from_the_signature():
    assert contraction_axes(wb.get_op("gemm")) == [[1], [0]]  # a[M,K], b[K,N] -> [M,N]
    assert contraction_axes(wb.get_op("gemm_fp8")) == [[1], [1], [], []]  # bt[N,K] is K-major
    assert contraction_axes(wb.get_op("softmax")) == [] and contraction_axes(wb.get_op("moe")) == []
    assert k_tail_lengths(129) == [128] and k_tail_lengths(40) == [32] and k_tail_lengths(33) == [32]
    assert k_tail_lengths(64) == [] and k_tail_lengths(1) == []  # no tail, or no whole tile before it


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_k_loop_that_drops_the_tail_is_named_k_tail(dtype):
    rep = wb.check(gemm_whole_tiles, "gemm", shapes=[TAIL], dtypes=[dtype], seeds=(0,), probes=False)
    assert not rep.ok and rep.diagnosis == "k_tail", rep.summary()
    assert "k_tail" in DIAGNOSES and "partial K tile" in DIAGNOSES["k_tail"]


def test_fp8_gemm_with_its_k_major_operand_gets_k_tail_too():
    rep = wb.check(fp8_whole_tiles, "gemm_fp8", shapes=[{"M": 4, "N": 6, "K": 40}], seeds=(0,), probes=False)
    assert not rep.ok and rep.diagnosis == "k_tail", rep.summary()


def test_other_wrong_gemms_are_not_k_tail():
    """The recomputation must match: a dropped head, all zeros, or K below one whole tile are something else."""
    for fn, shape in ((gemm_skips_first_terms, TAIL), (gemm_zeros, TAIL), (gemm_whole_tiles, NO_WHOLE_TILE)):
        rep = wb.check(fn, "gemm", shapes=[shape], dtypes=["float32"], seeds=(0,), probes=False)
        assert not rep.ok and rep.diagnosis != "k_tail", (fn.__name__, shape, rep.summary())


def test_the_registered_k_tail_kernel_is_named_k_tail():
    rep = wb.check(wb.variant("gemm", "wrong_k_tail"), shapes=[{"M": 1, "N": 1, "K": 33}], seeds=(0,), probes=False)
    assert not rep.ok and rep.diagnosis == "k_tail", rep.summary()


# ------------------------------------------------------------------------------------------------ one headline
@pytest.fixture(scope="module")
def tail_report():
    """Planned order puts a scattered run (K = 9: no whole tile) before the larger k_tail run (K = 40)."""
    return wb.check(gemm_whole_tiles, "gemm", shapes=[NO_WHOLE_TILE, {"M": 9, "N": 8, "K": 40}],
                    dtypes=["float32"], seeds=(0,), probes=False)


def test_the_headline_diagnosis_is_the_first_failure_shown(tail_report):
    rep = tail_report
    assert rep.failures[0].diagnosis == "scattered" and rep.diagnosis == "k_tail"  # the old contradiction's setup
    h = failure_headline(rep)
    assert h.diagnosis == "k_tail" and h.case.shape["K"] == 40
    for text in (h.text(), h.text(markdown=True)):
        first = text.split("First failure:", 1)[1]
        assert "K=40" in first and "diagnosis: k_tail" in first, text
        assert text.index("k_tail") < text.index("First failure")


def test_exercise_feedback_uses_the_same_headline(tail_report):
    ex = wb.exercise("gemm-smem-tiling")
    out = ex.feedback(tail_report)
    assert f"What is wrong: k_tail: {DIAGNOSES['k_tail']}" in out
    first = out.split("First failure:", 1)[1].splitlines()[0]
    assert "K=40" in first and "diagnosis: k_tail" in first, out
    assert failure_headline(tail_report).text() in out


# ------------------------------------------------------------------------------------------------ flags
def test_a_flag_ignoring_kernel_fails_its_drill_and_the_feedback_names_the_flag():
    """moe_topk's renormalize: a solution that always renormalizes fails on renormalize=False, which is named."""
    d = wb.drill("moe-topk-implement-triton")
    d = dataclasses.replace(d, shapes=({"T": 5, "E": 8, "top_k": 2},))  # one small shape; the flag probe stays
    model = wb.variant("moe_topk", d.model)  # the model answer, taken without recording a reveal

    def moe_topk(router_logits, top_k, renormalize=True):
        return model(router_logits, top_k, True)  # ignores renormalize

    res = d.fresh().submit(moe_topk)
    assert not res.passed, res.feedback
    assert "renormalize=False" in res.feedback and "honour `renormalize`" in res.feedback, res.feedback
    assert d.fresh().submit(model).passed  # the same drill passes the model: the flag is what failed
