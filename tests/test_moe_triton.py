"""moe, Triton fused (vLLM-style) and torch._grouped_mm variants: both pass the checker at the op's check shapes and
cases (fp32, fp16), ``fused_moe`` handles several row blocks per expert, short program groups and both block sizes,
grouped_mm refuses misaligned d / I with the reason, the GPU configs are pruned to the spill-free ones, and both
Triton kernels compile for sm_90 on tensor cores without spills.

Budget: ~40 s on 2 cores with cold caches. The sm_90 compile runs in a child process (see test_attention_triton.py
for why a child) started when this module is imported, so it overlaps the interpreter checks.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

import workbench as wb
from tests._ops import variant_report
from tests.conftest import InspectChild

wb.variants("moe")  # the op's own ladder first (torch_loop stays the checker's torch baseline)
from kernels._launch import _by_dtype  # noqa: E402
from kernels.moe import v3_triton_fused as fused  # noqa: E402
from kernels.moe import v4_torch_grouped_mm as gmm  # noqa: E402

DTYPES = ("float32", "float16")
needs_grouped_mm = pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="torch has no _grouped_mm")

# ---------------------------------------------------------------------------------------------- sm_90 compile
_INSPECT = textwrap.dedent("""
    import json
    import workbench as wb
    from kernels.moe import v3_triton_fused as fused

    out = {}
    for kernel in ("gate_up", "down"):
        for bm in (64, 16):  # the default (prefill, wgmma) and the decode tile (mma.sync)
            r = wb.inspect(fused.inspect_spec(kernel, "fp16", bm), arch="sm_90")
            out[f"{kernel}/{bm}"] = {"registers": r.registers, "spill_stores": r.spill_stores,
                                     "spill_loads": r.spill_loads, "wgmma": "wgmma.mma_async" in r.ptx,
                                     "hgmma": r.instruction_mix["HGMMA"], "hmma": r.instruction_mix["HMMA"],
                                     "smem": r.shared_static}
    print(json.dumps(out))
""")


_CHILD = InspectChild(_INSPECT)  # ~20 s of Triton + ptxas work, overlapping the interpreter tests below


@pytest.fixture(scope="module", autouse=True)
def _child_started() -> None:
    _CHILD.start()  # with this module's first test, on the worker that runs it (not at collection)


@pytest.fixture(scope="module")
def sm90() -> dict:
    return _CHILD.result()


# --------------------------------------------------------------------------------------------------- checker
def test_registered_with_torch_loop_as_the_baseline():
    names = [v.name for v in wb.variants("moe")]
    assert "triton_fused" in names
    assert [v.name for v in wb.variants("moe") if v.backend == "torch"][0] == "torch_loop"
    v = wb.variant("moe", "triton_fused")
    assert v.backend == "triton" and v.inspect_spec()["kind"] == "triton"
    assert not v.runs_here("bfloat16") if wb.mode() == "cpu" else v.runs_here("bfloat16")
    if hasattr(torch, "_grouped_mm"):
        assert wb.variant("moe", "torch_grouped_mm").backend == "torch"


def test_triton_fused_is_checked_at_every_check_shape_and_case():
    """tests/test_ops.py requires the report to pass: every shape and case, fp32 and fp16, one seed."""
    rep = variant_report("moe", "triton_fused")
    assert not rep.skipped, rep.skipped
    assert {c.case for c in rep.cases} == {"random", "one_expert"}
    assert {c.dtype for c in rep.cases} == set(DTYPES)
    assert len({tuple(c.shape.items()) for c in rep.cases}) == len(wb.get_op("moe").check_shapes)


@needs_grouped_mm
def test_grouped_mm_is_checked_where_aligned_and_refuses_misaligned_shapes():
    v = wb.variant("moe", "torch_grouped_mm")
    rep = variant_report("moe", "torch_grouped_mm")  # fp32 and fp16; tests/test_ops.py requires it to pass
    dev = "cuda" if wb.mode() == "gpu" else "cpu"
    ran = {(c.shape["d"], c.shape["I"], c.dtype) for c in rep.cases}
    for dt in DTYPES:  # the aligned check shapes (d, I multiples of 8) run wherever the device takes the dtype
        if gmm._probe(dev, wb.registry.as_dtype(dt), 16, 16) is None:
            assert {(16, 16, dt), (32, 24, dt)} <= ran
    # d = 33 is no multiple of 16 bytes in any dtype: refused with torch's reason and the rule.
    assert (33, 20, "float32") not in ran
    assert rep.skipped and all("torch._grouped_mm" in s and "d=33, I=20" in s for s in rep.skipped), rep.skipped
    why = v.why_not_here("float16", {"T": 2, "d": 24, "I": 20, "E": 4, "top_k": 2})
    if wb.mode() == "cpu":  # measured on PyTorch 2.13 CPU: I = 20 is 40 B in float16, so the shape is refused
        assert why and "I=20" in why and "multiple of 16 bytes" in why and "multiples of 8 in float16" in why
        assert v.why_not_here("float32", {"T": 2, "d": 24, "I": 20, "E": 4, "top_k": 2}) is None  # 80 B: fine
        assert v.why_not_here("float16", {"T": 2, "d": 24, "I": 40, "E": 4, "top_k": 2}) is None


@pytest.mark.parametrize("name", ["triton_fused", pytest.param("torch_grouped_mm", marks=needs_grouped_mm)])
def test_renormalize_off(name):
    shapes = [{"T": 7, "d": 16, "I": 32, "E": 8, "top_k": 3, "renormalize": False}]
    rep = wb.check(wb.variant("moe", name), shapes=shapes, dtypes=("float32",), seeds=(0,))
    assert rep.ok, rep.summary()


# ------------------------------------------------------------------------------------------------- fused_moe
@pytest.mark.parametrize("block_m,case", [(16, "one_expert"), (32, "random")])
def test_fused_moe_many_row_blocks_and_groups(block_m, case):
    # E = 8, T*k = 48 slots: 11 row blocks of 16 (one group of GROUP_M = 8 and a short one of 3); one_expert
    # puts all 24 tokens' first choice on expert 0 (two blocks of one expert); d = I = 40: two N tiles and two
    # K steps of the cpu config's 32, ragged at the end in both.
    sizes = {"T": 24, "d": 40, "I": 40, "E": 8, "top_k": 2}
    x, logits, w1, w2, k = wb.make_inputs("moe", dtype="float32", seed=4, case=case, **sizes)
    weights, ids = wb.variant("moe_topk", "torch_topk")(logits, k)
    out = fused.fused_moe(x, w1, w2, weights, ids, block_m=block_m)
    ref = wb.reference("moe")(x, logits, w1, w2, k)
    assert out.dtype == torch.float32 and out.shape == (24, 40)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=2e-5)


def test_fused_moe_refuses_bad_inputs():
    x, logits, w1, w2, k = wb.make_inputs("moe", dtype="float32", seed=0, T=3, d=16, I=16, E=4, top_k=2)
    weights, ids = wb.variant("moe_topk", "torch_topk")(logits, k)
    with pytest.raises(wb.OpError, match="multiple of 16"):
        fused.fused_moe(x, w1, w2, weights, ids, block_m=24)
    with pytest.raises(wb.OpError, match=r"\[T, top_k\]"):
        fused.fused_moe(x, w1, w2, weights[:, :1], ids)
    empty = fused.fused_moe(x[:0], w1, w2, weights[:0], ids[:0])
    assert empty.shape == (0, 16)


def test_block_m_follows_rows_per_expert(monkeypatch):
    assert fused.block_m_for(2, 8) == (16 if wb.mode() == "gpu" else fused.CPU_BLOCK_M)
    monkeypatch.setattr(fused, "MODE", "gpu")
    assert fused.block_m_for(2, 8) == 16  # decode: one row per hit expert
    assert fused.block_m_for(8 * 16, 8) == 16
    assert fused.block_m_for(2 * 1024, 8) == 64
    assert fused.block_m_for(2 * 4096, 8) == 64  # Mixtral prefill at T = 4096: 1024 rows per expert
    assert fused.block_m_for(2 * 16384, 8) == 128


def test_gpu_configs_are_pruned_to_the_spill_free_ones():
    # The measured tables in the module: gate/up (two accumulators) drops 128x128 / 4 warps and 128x256 / 8 warps
    # at BLOCK_M = 128 (both spill); fp32 keeps only its FMA tiles; every kept config fits shared memory.
    half, single = torch.empty(1, dtype=torch.float16), torch.empty(1, dtype=torch.float32)
    every = fused.CONFIGS + fused.FP32_CONFIGS
    # The split by dtype is tuned()'s (kernels/_launch.py); the module's pruner then keeps what fits.
    up = _by_dtype(fused.FP32_CONFIGS, "w1_ptr", fused._prune(2, "w1_ptr"))
    down = _by_dtype(fused.FP32_CONFIGS, "w2_ptr", fused._prune(1, "w2_ptr"))
    for bm in (16, 64, 128):
        for prune, name in ((up, "w1_ptr"), (down, "w2_ptr")):
            kept = prune(every, {name: half}, BLOCK_M=bm)
            assert kept and all(c in fused.CONFIGS for c in kept)
            kept32 = prune(every, {name: single}, BLOCK_M=bm)
            assert kept32 and all(c in fused.FP32_CONFIGS for c in kept32)
    kept = {(c.kwargs["BLOCK_N"], c.num_warps) for c in up(every, {"w1_ptr": half}, BLOCK_M=128)}
    assert (128, 4) not in kept and (256, 8) not in kept and (64, 4) in kept
    assert len(down(every, {"w2_ptr": half}, BLOCK_M=128)) == len(fused.CONFIGS)


# ---------------------------------------------------------------------------------------------------- sm_90
@pytest.mark.parametrize("what", ["gate_up/64", "down/64", "gate_up/16", "down/16"])
def test_sm90_build_uses_tensor_cores_without_spills(sm90, what):
    # Measured (Triton 3.7, fp16, BLOCK_N 128, BLOCK_K 64, 4 warps, 3 stages): BLOCK_M 64 gate/up 220 registers,
    # 120 KiB shared, down 136; BLOCK_M 16 (decode) gate/up 144, down 88: mma.sync (HMMA), not wgmma.
    r = sm90[what]
    assert 0 < r["registers"] <= 255
    if what.endswith("/64"):
        assert r["wgmma"] and r["hgmma"] > 0, f"{what}: no wgmma/HGMMA in the sm_90 build: {r}"
    else:
        assert r["hmma"] + r["hgmma"] > 0, f"{what}: no tensor-core instruction in the sm_90 build: {r}"
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, f"{what}: spills at {r['registers']} registers: {r}"
