"""wb.check(..., deterministic=True / batch_invariant=True) and wb.invariance_table: the batch axis read from each
op's signature, both modes on every op, known-invariant kernels passing, a batch-dependent split count and a
function with state between calls failing with the element, the values and the batch sizes named."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench.checker import DIAGNOSES, CheckReport
from workbench.invariance import CPU_BATCH_SIZES, REPEATS, InvarianceReport, batch_axes, differ


# ----------------------------------------------------------------------------------------------- the batch axis
def test_the_batch_axis_comes_from_the_signature():
    gemm = batch_axes("gemm")
    assert (gemm.dim, gemm.inputs, gemm.outputs) == ("M", (0, None), (0,))  # rows of a; b is shared
    dec = batch_axes("decode_attention")  # q, block_table and seq_lens along B; the paged KV cache is shared
    assert (dec.dim, dec.inputs, dec.outputs) == ("B", (0, None, None, 0, 0), (0,))
    assert batch_axes("lse_merge").inputs == (1, 1)  # o[S,B,H,D]: the batch is the second axis
    bwd = batch_axes("attention_bwd")  # dq, dk, dv have the dims of q, k, v
    assert (bwd.dim, bwd.outputs, bwd.output_names) == ("B", (0, 0, 0), ("dq", "dk", "dv"))
    assert batch_axes("transpose").inputs == (1,)  # out[N,M]: row j of the output is column j of x
    with pytest.raises(wb.OpError, match=r"moe_align has no batch axis"):
        batch_axes("moe_align")


def test_differ_counts_nan_at_the_same_place_as_equal():
    a = torch.tensor([1.0, float("nan"), 3.0, float("nan")])
    b = torch.tensor([1.0, float("nan"), 3.5, 0.0])
    assert differ(a, b).tolist() == [False, False, True, True]


# ------------------------------------------------------------------------------------------- every op, one variant
def test_both_modes_run_on_every_op_with_a_batch_axis():
    for op in wb.ops():
        vs = wb.variants(op, runnable=True)
        v = next((x for x in vs if x.backend == "torch"), vs[0])
        if wb.get_op(op).distributed:  # ranks of a process group: deterministic mode only (workbench/comm_check.py)
            with pytest.raises(wb.OpError, match=f"{op}: batch_invariant=True does not apply to a distributed op"):
                wb.check(v, batch_invariant=True)
            rep = wb.check(v, deterministic=True, shapes=wb.get_op(op).check_shapes[-2:])
            assert rep.ok and [c.probe for c in rep.cases] == ["deterministic"], rep.summary()
            continue
        try:
            axes = batch_axes(op)
        except wb.OpError:
            with pytest.raises(wb.OpError, match=f"{op} has no batch axis"):
                wb.check(v, batch_invariant=True)
            rep = wb.check(v, deterministic=True)
            assert rep.ok and [c.probe for c in rep.cases] == ["deterministic"], rep.summary()
            continue
        rep = wb.check(v, deterministic=True, batch_invariant=True)
        assert isinstance(rep, CheckReport) and [c.probe for c in rep.cases] == ["deterministic", "batch"], op
        det, batch = rep.cases
        if det.ok or wb.mode() == "cpu":  # on a GPU torch's own atomics (index_add_, a backward) may differ
            assert det.ok and f"{REPEATS} calls on the same inputs, bitwise identical" in det.detail, rep.summary()
        else:
            assert det.diagnosis == "nondeterministic_bits" and "differs from call 1 at " in det.detail, op
        assert batch.shape[axes.dim] == 64  # a torch variant runs the full batch, even in cpu mode
        # CPU BLAS and SDPA pick their kernels by size, so a torch op may well be batch-variant here: either way
        # the run was judged, not failed for another reason
        assert batch.ok or (batch.diagnosis == "batch_variant" and "batch sizes compared: 64, 7, 1" in batch.detail
                            and batch.detail.startswith("row ")), rep.summary()


# ------------------------------------------------------------------------------------ known-invariant kernels
@pytest.mark.parametrize("op,name", [("softmax", "cuda_warp"), ("softmax", "triton_fused"),
                                     ("rmsnorm", "triton_fused"), ("rmsnorm", "cuda_vec")])
def test_row_kernels_are_deterministic_and_batch_invariant(op, name):
    rep = wb.check(wb.variant(op, name), deterministic=True, batch_invariant=True, raise_on_fail=True)
    assert isinstance(rep, InvarianceReport) and rep.ok and len(rep.cases) == 2
    s = rep.summary()
    assert s.startswith(f"PASS {op}/{name}: deterministic and batch-invariant (bitwise) in 2 runs")
    if wb.mode() == "cpu":  # emulated: the smaller batches, and the report says so
        sizes = ", ".join(map(str, CPU_BATCH_SIZES))
        assert f"rows bitwise identical in batches of {sizes}" in s and f"note: batches of {sizes} rows, not 64" in s


@requires_cpu_mode
def test_a_row_kernel_whose_vector_path_follows_the_row_address_is_batch_variant():
    # softmax_vec.cu peels scalars up to each row's 16-byte boundary: at N = 33 floats row r starts at byte 132 r of
    # the batch of 8, but at byte 0 of a batch that starts with it: the same row is summed in another order
    rep = wb.check(wb.variant("softmax", "cuda_vec"), batch_invariant=True, shapes=[{"M": 8, "N": 33}])
    assert rep.diagnosis == "batch_variant", rep.summary()
    c = rep.cases[0]
    assert c.detail.startswith("row ") and c.detail.endswith("batch sizes compared: 8, 3, 1")
    row = int(c.detail.split()[1])
    assert (row * 33 * 4) % 16 != 0  # a row that does not start on a 16-byte boundary in the batch of 8


# ------------------------------------------------------------- split-KV decode: split count against split size
#: B x Hq large enough that the GPU policy splits a 10-page sequence 5 ways in the batch of 8, 10 ways alone.
DECODE = {"B": 8, "Hq": 32, "Hkv": 8, "L": 40, "D": 16, "page": 4}


@requires_cpu_mode
def test_cuda_split_with_its_gpu_split_count_is_batch_variant(monkeypatch):
    # On a GPU cuda_split takes ceil(2 * 132 * 4 / (B * Hq)) splits (at most 16, at most the batch's longest
    # sequence's pages); cpu mode fixes 2. Its GPU policy, emulated: row 0 (the longest, 10 pages) gets 5 splits
    # of 2 pages in the batch of 8 and 10 splits of 1 page in the batch of 3, so its partial sums differ.
    from kernels.decode_attention import _host

    monkeypatch.setattr(_host, "MODE", "gpu")
    assert _host.num_splits(8 * 32, 10) == 5 and _host.num_splits(3 * 32, 10) == 10
    rep = wb.check(wb.variant("decode_attention", "cuda_split"), batch_invariant=True, shapes=[DECODE])
    assert not rep.ok and rep.diagnosis == "batch_variant"
    c = rep.cases[0]
    assert c.detail.startswith("row 0 differs: out[0, ") and "in the batch of 8 but " in c.detail
    assert "in a batch of 3 (rows 0..2)" in c.detail and c.detail.endswith("batch sizes compared: 8, 3, 1")
    s = rep.summary()
    assert "diagnosis: batch_variant: " + DIAGNOSES["batch_variant"] in s and "FAIL decode_attention/cuda_split" in s
    with pytest.raises(AssertionError, match="batch_variant"):
        rep.raise_if_failed()


def triton_split_count_by_batch(q, k_cache, v_cache, block_table, seq_lens, scale=None):
    """triton_split's kernels with the split count a GPU tuner tends to pick: more splits for a short batch."""
    from kernels.decode_attention import v6_triton_split as V6

    splits = 2 if q.shape[0] < 4 else 1  # cpu mode's partial buffers hold V6.MAX_SPLITS = 2
    o, lse = V6.split_partials(q, k_cache, v_cache, block_table, seq_lens, scale, kernel=V6.split_kernel,
                               SPLITS=splits)
    return V6.merge(o, lse, wb.empty_like(q))


@requires_cpu_mode
def test_a_split_count_chosen_by_batch_breaks_batch_invariance_and_a_fixed_split_size_does_not():
    shape = [{"B": 8, "Hq": 2, "Hkv": 1, "L": 9, "D": 16, "page": 4}]  # row 0 has 3 pages: split 1 way or 2 ways
    rep = wb.check(triton_split_count_by_batch, "decode_attention", batch_invariant=True, shapes=shape)
    assert rep.diagnosis == "batch_variant" and rep.cases[0].detail.startswith("row 0 differs: out[0, "), rep.summary()
    assert "in the batch of 8 but " in rep.cases[0].detail and "in a batch of 3 (rows 0..2)" in rep.cases[0].detail
    fixed = wb.check(wb.variant("decode_attention", "triton_split_fixed"), deterministic=True, batch_invariant=True,
                     shapes=shape)
    assert fixed.ok and len(fixed.cases) == 2, fixed.summary()


# ---------------------------------------------------------------------------------- nondeterminism, shown
CALLS = [0]


def softmax_with_state(x: torch.Tensor) -> torch.Tensor:
    """Softmax whose element [1, 2] moves one ulp on every call after the first (state kept between calls)."""
    CALLS[0] += 1
    out = torch.softmax(x, dim=-1)
    if CALLS[0] > 1:
        out[1, 2] = torch.nextafter(out[1, 2], torch.tensor(2.0))
    return out


def test_a_function_with_state_between_calls_is_nondeterministic_and_the_element_is_named():
    CALLS[0] = 0
    rep = wb.check(softmax_with_state, "softmax", deterministic=True, shapes=[{"M": 4, "N": 8}])
    assert not rep.ok and rep.diagnosis == "nondeterministic_bits"
    c = rep.cases[0]
    first, again = c.detail.split(": ", 1)[1].split(";")[0].split(" then ")
    assert c.detail.startswith("call 2 differs from call 1 at out[1, 2]: ")
    assert float(again) > float(first) and torch.tensor(float(again)) == torch.nextafter(
        torch.tensor(float(first)), torch.tensor(2.0))
    assert f"{REPEATS - 1} of {REPEATS - 1} repeats differ, 1/32 elements differ over the {REPEATS} calls" in c.detail
    ulp = float(torch.tensor(float(again)) - torch.tensor(float(first)))  # one float32 ulp at this value
    assert c.detail.endswith(f"max |difference| {ulp:.3g}")
    assert f"FAIL  M=4, N=8  float32 seed=0 [deterministic]  nondeterministic_bits: {c.detail}" in rep.summary()


def test_a_wrong_function_fails_on_the_reference_before_its_bits_are_judged():
    rep = wb.check(lambda x: torch.zeros_like(x), "softmax", deterministic=True, batch_invariant=True,
                   shapes=[{"M": 4, "N": 8}])
    assert not rep.ok and {c.diagnosis for c in rep.cases} <= set(DIAGNOSES) - {"nondeterministic_bits",
                                                                                   "batch_variant"}
    assert all(c.n_mismatch == 32 for c in rep.cases if c.probe == "deterministic")


# ------------------------------------------------------------------------------------------------------ the table
def test_invariance_table_on_two_ops():
    t = wb.invariance_table(["softmax", "moe_align"], variants=["torch_softmax", "cuda_warp", "torch_sort"])
    assert [(r.op, r.variant) for r in t] == [("softmax", "torch_softmax"), ("softmax", "cuda_warp"),
                                              ("moe_align", "torch_sort")]
    assert (t["cuda_warp"].deterministic, t["cuda_warp"].batch_invariant) == ("yes", "yes")
    row = t["moe_align/torch_sort"]
    assert row.deterministic == "yes" and row.batch_invariant == "skipped"
    assert "moe_align has no batch axis" in row.why_batch_invariant
    text, page = str(t), t._repr_html_()
    assert text.splitlines()[0].split() == ["op", "variant", "backend", "deterministic", "batch-invariant"]
    assert "moe_align/torch_sort: deterministic yes" in text and "<td>cuda_warp</td>" in page


def test_a_gpu_only_variant_is_skipped_in_the_table_with_why():
    if wb.mode() == "gpu":
        pytest.skip("runs on a GPU")
    row = wb.invariance_table("gemm", variants=["cuda_mma_sync"]).rows[0]
    assert (row.deterministic, row.batch_invariant) == ("skipped", "skipped")
    assert "GPU-only" in row.why_deterministic and "GPU-only" in row.why_batch_invariant


def test_a_variant_registered_nondeterministic_is_not_called_deterministic_on_one_quiet_run():
    import dataclasses

    from workbench.invariance import _table_row

    v = dataclasses.replace(wb.variant("softmax", "torch_softmax"), deterministic=False)  # as an atomics kernel
    row = _table_row(v, None)
    assert row.deterministic == "no (declared)" and "registered deterministic=False" in row.why_deterministic
    rep = wb.check(v, deterministic=True)
    assert rep.ok and "note: softmax/torch_softmax is registered deterministic=False: " in rep.summary()
