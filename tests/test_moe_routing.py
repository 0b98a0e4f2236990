"""moe_topk and moe_align, CUDA C and Triton: every check shape, case and dtype that runs here against the float64
references, edge shapes (E = 1, E = 1000/1024, T = 0, top_k = E, block = 1 and 1024, renormalize=False, ties,
-inf logits), the multi-block align path, the known-wrong kernel's diagnosis, bad input, and the sm_90 builds.

Budget, 2 cores: ~24 s with cold caches (the CPU engine's runtime and one g++ build per .cu file ~7 s, the sm_90
builds ~12 s: two nvcc runs in threads beside three Triton compiles), ~12 s warm; pytest's own start adds ~9 s.
The Triton interpreter costs ~3 ms per tl reduction call, so the cpu-mode tiles are large and the problems small.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import workbench as wb
from tests._ops import variant_report, wrong_report
from tests.conftest import CPU_MODE
from workbench.cuda.errors import ToolchainNotFoundError

# The ops' packages first (teaching order), then the modules of this file's variants, which register on import.
wb.variants("moe_topk")
wb.variants("moe_align")
import kernels.moe_align.v1_cuda_align as cuda_align_mod  # noqa: E402
import kernels.moe_align.v2_triton_align as triton_align_mod  # noqa: E402
import kernels.moe_align.wrong  # noqa: E402, F401
import kernels.moe_topk.v1_cuda_topk as cuda_topk_mod  # noqa: E402
import kernels.moe_topk.v2_triton_topk as triton_topk_mod  # noqa: E402

TOPK = ("cuda_topk", "triton_topk")
ALIGN = ("cuda_align", "triton_align")


def _variant(op: str, name: str) -> wb.Variant:
    v = wb.variant(op, name)
    if v.backend == "cuda" and CPU_MODE:
        from workbench.cuda.toolchain import find_cxx

        try:
            find_cxx()
        except ToolchainNotFoundError as e:
            pytest.skip(str(e))
    return v


def test_python_api_is_the_registered_variants():
    assert cuda_topk_mod.cuda_topk is wb.variant("moe_topk", "cuda_topk")
    assert triton_topk_mod.triton_topk is wb.variant("moe_topk", "triton_topk")
    assert cuda_align_mod.cuda_align is wb.variant("moe_align", "cuda_align")
    assert triton_align_mod.triton_align is wb.variant("moe_align", "triton_align")
    for op, names in (("moe_topk", TOPK), ("moe_align", ALIGN)):
        for name in names:
            v = wb.variant(op, name)
            assert v.inspect_spec is not None and v.inspect_spec()["kind"] == v.backend


@pytest.mark.parametrize("op,name", [("moe_topk", n) for n in TOPK] + [("moe_align", n) for n in ALIGN])
def test_checked_at_every_check_shape_case_and_dtype(op, name):
    """tests/test_ops.py requires the report to pass; here: it covers every check shape, input case and dtype."""
    v = _variant(op, name)
    spec = wb.get_op(op)
    rep = variant_report(op, name)
    assert {tuple(sorted(c.shape.items())) for c in rep.cases} == {tuple(sorted(s.items())) for s in spec.check_shapes}
    assert {c.case for c in rep.cases} == set(spec.cases)
    dts = {c.dtype for c in rep.cases}
    if op == "moe_align":
        assert dts == {"int32"}
    elif v.backend == "cuda" or not CPU_MODE:
        assert dts == {"float32", "float16", "bfloat16"}
    else:  # bf16 is refused under the Triton interpreter, and only bf16
        assert dts == {"float32", "float16"} and all("bfloat16" in s for s in rep.skipped)


# Beyond the check shapes: one expert, a 33-expert ragged warp (2 logits per lane), E = 1000 (32 per lane, the
# largest CUDA kernel), top_k = E with raw probabilities, an empty batch.
TOPK_EDGES = [{"T": 3, "E": 1, "top_k": 1}, {"T": 4, "E": 33, "top_k": 33, "renormalize": False},
              {"T": 2, "E": 1000, "top_k": 3}, {"T": 6, "E": 60, "top_k": 5, "renormalize": False},
              {"T": 0, "E": 8, "top_k": 2}]


@pytest.mark.parametrize("name", TOPK)
def test_topk_edge_shapes_and_raw_probabilities(name):
    rep = wb.check(_variant("moe_topk", name), shapes=TOPK_EDGES, dtypes=("float32", "float16"), seeds=(0,))
    assert rep.ok, rep.summary()
    assert len(rep.cases) == 2 * len(TOPK_EDGES) * len(wb.get_op("moe_topk").cases)  # two dtypes, every case


@pytest.mark.parametrize("name", TOPK)
def test_topk_ties_go_to_the_lower_id_and_neg_inf_logits_stay_selectable(name):
    v = _variant("moe_topk", name)
    x = torch.zeros(3, 40)
    x[1, 7] = x[1, 39] = 2.0  # a tie for first place between experts 7 and 39
    x[2, :] = float("-inf")  # only experts 5 and 35 are finite: top_k = E reaches the -inf ones
    x[2, 5], x[2, 35] = 1.0, 1.0
    w, ids = v(x.to(wb.device()), 40, renormalize=False)
    ref_w, ref_ids = wb.reference("moe_topk")(x, 40, renormalize=False)
    assert ids.cpu().tolist() == ref_ids.tolist()
    assert ids[0, :4].tolist() == [0, 1, 2, 3] and ids[1, :3].tolist() == [7, 39, 0]
    assert ids[2, :3].tolist() == [5, 35, 0] and sorted(ids[2].tolist()) == list(range(40))
    assert (w.cpu().double() - ref_w).abs().max() <= 1e-6  # (torch.testing would import torch.distributed: 1.3 s)
    w, ids = v(x[:2].to(wb.device()), 2)
    assert ids.tolist() == [[0, 1], [7, 39]] and w.tolist() == [[0.5, 0.5], [0.5, 0.5]]


# One expert, the largest scan (E = 1024 = 4 experts per thread of the CUDA scan), the largest block, an empty batch
# (n = 0, and P = 0 with block 1), E = 1 with block 1.
ALIGN_EDGES = [{"T": 9, "top_k": 1, "E": 1, "block": 4}, {"T": 40, "top_k": 6, "E": 1024, "block": 8},
               {"T": 30, "top_k": 2, "E": 3, "block": 1024}, {"T": 0, "top_k": 2, "E": 8, "block": 16},
               {"T": 0, "top_k": 1, "E": 5, "block": 1}, {"T": 7, "top_k": 1, "E": 1, "block": 1}]


@pytest.mark.parametrize("name", ALIGN)
def test_align_edge_shapes(name):
    rep = wb.check(_variant("moe_align", name), shapes=ALIGN_EDGES, seeds=(0,))
    assert rep.ok, rep.summary()


def test_cuda_align_multi_block_path(monkeypatch):
    # Past SLOTS_PER_BLOCK slots the count kernel runs on G blocks (global counts, last-block ticket) and the
    # warp-aggregated scatter is a second kernel. Default threshold first (n = 4800: 2 blocks), then 64 slots per
    # block so every check shape takes that path (T=1000, top_k=2: 32 blocks; T=1: still one block).
    v = _variant("moe_align", "cuda_align")
    big = {"T": 600, "top_k": 8, "E": 60, "block": 16}
    assert cuda_align_mod.grid_for(600 * 8) == 2
    rep = wb.check(v, shapes=[big], seeds=(0,))
    assert rep.ok, rep.summary()
    monkeypatch.setattr(cuda_align_mod, "SLOTS_PER_BLOCK", 64)
    assert cuda_align_mod.grid_for(2000) == 32
    rep = wb.check(v, seeds=(0,))
    assert rep.ok, rep.summary()


def test_align_outputs_feed_a_grouped_gemm():
    # What the MoE GEMM relies on beyond the checker's canonical comparison: every slot appears exactly once, each
    # row block holds one expert's slots, and the sentinel fills the rest (checked on the skewed router).
    ids, E, block = wb.make_inputs("moe_align", T=50, top_k=4, E=16, block=8, case="skewed", seed=2)
    n = ids.numel()
    for name in ALIGN:
        sorted_ids, expert_ids, n_padded = _variant("moe_align", name)(ids, E, block)
        used = int(n_padded)
        real = sorted_ids[sorted_ids < n]
        assert sorted(real.tolist()) == list(range(n)), name
        assert (sorted_ids[used:] == n).all() and (expert_ids[used // block:] == -1).all(), name
        rows = sorted_ids[:used].reshape(-1, block)
        flat = ids.reshape(-1)
        for b in range(used // block):
            got = rows[b][rows[b] < n]
            assert (flat[got.long()] == expert_ids[b]).all(), (name, b)


def test_known_wrong_unpadded_fails_where_padding_is_needed():
    v = wb.variant("moe_align", "wrong_unpadded")
    assert v.known_wrong and v.expected_diagnosis == "scattered"
    rep = wrong_report("moe_align", "wrong_unpadded")  # its diagnosis: tests/test_ops.py
    assert not rep.ok, rep.summary()
    # With block = 1 nothing needs rounding: exactly the check shape with block 1 passes.
    assert {c.shape["block"] for c in rep.cases if c.ok} == {1}
    assert all(c.worst["output"] == "sorted_ids" for c in rep.failures)


@pytest.mark.parametrize("name", TOPK)
def test_topk_bad_input_names_the_op(name):
    v = _variant("moe_topk", name)
    x = torch.randn(4, 8, device=wb.device())
    for args in ((x.to(torch.int32), 2), (x.double(), 2), (x, 9), (x, 0), (x.t(), 2), (x[0], 1)):
        with pytest.raises(wb.OpError, match="moe_topk"):
            v(*args)
    big = 1 + (cuda_topk_mod.MAX_E if name == "cuda_topk" else triton_topk_mod.MAX_E)
    with pytest.raises(wb.UnsupportedHere, match=rf"moe_topk/{name}.*E={big}"):
        v(torch.zeros(1, big, device=wb.device()), 2)


@pytest.mark.parametrize("name", ALIGN)
def test_align_bad_input_names_the_op(name):
    v = _variant("moe_align", name)
    ids = torch.tensor([[0, 3], [2, 1]], dtype=torch.int32, device=wb.device())
    for args in ((ids, 3, 16), (ids - 1, 4, 16), (ids.long(), 4, 16), (ids.float(), 4, 16), (ids, 4, 0),
                 (ids, 4, 2048), (ids, 1, 16), (ids.t(), 4, 16)):
        with pytest.raises(wb.OpError, match="moe_align"):
            v(*args)
    with pytest.raises(wb.UnsupportedHere, match=rf"moe_align/{name}.*E=1025"):
        v(ids, 1025, 16)


def _has_cuda_tools() -> bool:
    from workbench import inspection

    try:
        for tool in ("nvcc", "ptxas", "cuobjdump"):
            inspection.find_cuda_tool(tool)
        return True
    except ToolchainNotFoundError:
        return False


@pytest.mark.skipif(not _has_cuda_tools(), reason="nvcc/ptxas/cuobjdump not installed")
def test_sm90_builds_without_spills():
    # ptxas (sm_90), measured: cuda_topk bf16 E = 256 (8 logits per lane): 48 registers; cuda_align count: 32
    # registers, 8232 B static shared (counts + starts + warp sums + flag), scatter 20 registers; triton_topk bf16
    # E = 256, top_k = 8: 96 registers; triton_align count 55 (1 KiB shared), place 47 (8 KiB). No spills anywhere.
    from workbench.inspection import parse_ptxas

    # nvcc/ptxas are child processes: the two CUDA C builds run in threads while this thread compiles the Triton
    # kernels one after another (a Triton compile swaps triton.language's helpers in and out: not thread-safe).
    with ThreadPoolExecutor(2) as pool:
        cuda = {name: pool.submit(wb.inspect, wb.variant(op, name), arch="sm_90")
                for op, name in (("moe_topk", "cuda_topk"), ("moe_align", "cuda_align"))}
        triton = {"topk": wb.inspect(wb.variant("moe_topk", "triton_topk"), arch="sm_90")}
        triton.update({w: wb.inspect(triton_align_mod._spec(w), arch="sm_90") for w in ("count", "place")})
        r = cuda["cuda_topk"].result()
        assert r.arch == "sm_90" and 0 < r.registers <= 64 and r.spill_stores == r.spill_loads == 0
        assert r.instruction_mix["SHFL"] >= 20 and r.shared_static == 0  # 2 x 5 softmax + 2 x 5 argmax shuffles
        r = cuda["cuda_align"].result()  # nvcc and ptxas see both kernels of the file
    assert 0 < r.registers <= 64 and r.spill_stores == 0 and r.shared_static == 4 * (1024 + 1025 + 8 + 1)
    assert "ATOMS" in r.sass and "MEMBAR" in r.sass  # shared histogram, __threadfence around the ticket
    scatter = parse_ptxas(r.ptxas_log)["moe_align_scatter"]
    assert 0 < scatter["registers"] <= 32 and scatter["spill_stores"] == 0
    assert "match.any.sync" in r.ptx  # the scatter's warp aggregation
    assert 0 < triton["topk"].registers <= 128
    for which, r in triton.items():
        assert r.arch == "sm_90" and r.registers > 0 and r.spill_stores == r.spill_loads == 0, which
    assert triton["count"].registers <= 64 and triton["place"].registers <= 64
