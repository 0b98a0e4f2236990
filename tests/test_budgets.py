"""Performance budgets: parsed from friendly names or Nsight keys, judged on wb.profile, worded for a learner."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench import budgets
from workbench.budgets import BudgetError

# A correct vecadd whose threads each add 8 consecutive elements: neighbouring lanes are 32 bytes apart, so every
# lane of a warp load is alone in its 32-byte sector (efficiency 4 / 32).
CHUNKED = r"""
extern "C" __global__ void add_chunks(const float* x, const float* y, float* out, int n) {
    int first = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    for (int i = first; i < first + 8 && i < n; ++i) out[i] = x[i] + y[i];
}
"""
_chunked: list = []


def vecadd_chunked(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if not _chunked:
        _chunked.append(wb.cuda.RawKernel(CHUNKED, "add_chunks"))
    out = wb.empty_like(x)
    n = x.numel()
    _chunked[0](((n + 8 * 128 - 1) // (8 * 128),), (128,),
                (wb.interop.to_raw(x), wb.interop.to_raw(y), wb.interop.to_raw(out), np.int32(n)))
    return out


def test_parse_names_labels_aliases_and_raw_keys():
    got = budgets.parse({"global load efficiency": ">= 90%", "Shared Bank Conflicts": "== 0  # pad the tile",
                         "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "< 1_000", "tl.dot FLOPs": "<= 2e6",
                         "sectors per store request": "<=4"}, "t")
    assert [(b.key, b.op, b.limit, b.why) for b in got] == [
        ("wb__global_load_efficiency.ratio", ">=", 0.9, ""),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "==", 0.0, "pad the tile"),
        ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "<", 1000.0, ""),
        ("triton__dot_flops.sum", "<=", 2e6, ""),
        ("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio", "<=", 4.0, "")]
    assert str(got[0]) == "global load efficiency >= 90%" and str(got[3]) == "tl.dot FLOPs <= 2,000,000"


@pytest.mark.parametrize("spec, match", [
    ({"dram bytes": "<= 1e6"}, r"ex: budget on 'dram bytes': no profile metric named 'dram bytes'.*global load "
                               r"efficiency"),
    ({"barriers": "at most 4"}, r"'at most 4' is not '<op> <number>'"),
    ({"barriers": "<= 4 sectors"}, r"is not '<op> <number>'"),
    ({"barriers": 4}, r"must be a string such as '<= 4'"),
    ({"barriers": "<= 10%"}, r"a percentage only fits a fraction metric"),
])
def test_malformed_budgets_are_refused_naming_where_and_why(spec, match):
    with pytest.raises(BudgetError, match=match):
        budgets.parse(spec, "ex")


def test_check_with_budgets_met_passes_and_lists_them():
    rep = wb.check(wb.variant("vecadd", "triton_block"), dtypes=["float32"], seeds=(0,), progress=False,
                   budgets={"global load bytes": "<= 8000", "tl.dot FLOPs": "== 0"}, budget_shape={"N": 1000})
    assert rep.ok and rep.correct and rep.diagnosis is None
    assert [r.value for r in rep.budgets.results] == [8000, 0]
    assert "budgets (wb.profile at N=1000, float32):\n    met: global load bytes <= 8,000\n    met: tl.dot FLOPs == 0" \
        in rep.summary()


def test_correct_but_over_budget_is_not_a_pass():
    rep = wb.check(wb.variant("vecadd", "triton_block"), dtypes=["float32"], seeds=(0,), progress=False,
                   budgets={"global bytes": "<= 8000  # x + y + out at N = 1000 is 12,000 B: impossible"},
                   budget_shape={"N": 1000})
    assert rep.correct and not rep.ok and not rep and rep.diagnosis == "over_budget"
    (miss,) = rep.budgets.missed
    assert miss.value == 12_000
    assert miss.message == ("12,000 global bytes where 8,000 are possible: x + y + out at N = 1000 is 12,000 B: "
                            "impossible (budget: global bytes <= 8,000)")
    text = rep.summary()
    assert text.startswith("SLOW vecadd/triton_block: all 6 runs match the float64 reference, but it misses 1 "
                           "performance budget.\n  diagnosis: over_budget: ")
    assert "MISSED: 12,000 global bytes where 8,000 are possible" in text and "MISSED" in rep._repr_html_()
    with pytest.raises(AssertionError, match="SLOW"):
        rep.raise_if_failed()


def test_budgets_of_a_function_that_launches_nothing_cannot_pass():
    rep = wb.check(lambda x, y: x + y, "vecadd", seeds=(0,), progress=False,
                   budgets={"global load efficiency": ">= 0.9"}, budget_shape={"N": 64})
    assert rep.correct and not rep.ok
    assert rep.budgets.missed[0].message.startswith(
        "the global load efficiency could not be measured: your function launched no kernel the emulators count")


def test_a_wrong_kernel_is_diagnosed_before_any_budget_is_measured():
    rep = wb.check(wb.variant("vecadd", "wrong_off_by_one_mask"), dtypes=["float32"], seeds=(0,), progress=False,
                   budgets={"global bytes": "<= 1"})
    assert rep.diagnosis == "masking" and rep.budgets is None


def test_gpu_mode_without_ncu_says_the_budgets_were_not_measured(monkeypatch):
    from workbench import _mode
    from workbench import profile_counters as prof

    def no_ncu(*a, **k):
        raise prof.NcuNotFoundError("ncu is not on PATH")

    monkeypatch.setattr(_mode, "MODE", "gpu")
    monkeypatch.setattr(prof, "profile", no_ncu)
    rep = budgets.measure(lambda x, y: x + y, "vecadd", budgets.parse({"barriers": "== 0"}, "t"), {"N": 8},
                          torch.float32)
    assert rep.ok and rep.unmeasured == "gpu mode: ncu is not on PATH"
    assert rep.lines() == ["budgets not measured (gpu mode: ncu is not on PATH)"]


@requires_cpu_mode
def test_uncoalesced_cuda_vecadd_is_told_its_efficiency():
    lim = {"global load efficiency": ">= 0.9  # neighbouring threads should add neighbouring elements"}
    rep = wb.check(vecadd_chunked, "vecadd", seeds=(0,), progress=False, budgets=lim, budget_shape={"N": 4096})
    assert rep.correct and rep.diagnosis == "over_budget"
    assert rep.budgets.missed[0].message == (
        "a global load efficiency of 12.5% where 90% is possible: neighbouring threads should add neighbouring "
        "elements (budget: global load efficiency >= 90%)")
    assert wb.check(wb.variant("vecadd", "cuda_grid"), seeds=(0,), progress=False, budgets=lim).ok


def test_a_call_that_fails_only_at_the_budget_shape_is_a_miss_that_says_why():
    def vecadd(x, y):  # correct at the check's sizes, refuses the (larger) budget shape
        if x.numel() > 2000:
            raise ValueError("this kernel handles at most 2000 elements")
        return x + y

    rep = wb.check(vecadd, "vecadd", seeds=(0,), shapes=[{"N": 17}], progress=False, probes=False,
                   budgets={"global bytes": "<= 1e9"}, budget_shape={"N": 4096})  # the index-width probe would fail
    assert rep.correct and not rep.ok and rep.diagnosis == "over_budget"
    assert rep.budgets.missed[0].message == (
        "the global bytes could not be measured: the profiled call at N=4096, float32 raised ValueError: this "
        "kernel handles at most 2000 elements (every checked run passed, but the budgets are measured at this "
        "shape: run wb.profile on it to see the error)")
