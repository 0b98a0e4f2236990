"""moe, Numba and CUDA C variants: the naive per-token Numba kernel and the unfused permute / grouped-GEMM CUDA C
pipeline against the float64 reference (every check shape and input case, renormalize on and off), the CUDA C
pipeline's determinism, cpu-mode and expert-count refusals, and its sm_90 build through wb.inspect."""

from __future__ import annotations

import re

import pytest
import torch

import kernels.moe.v1_numba_naive  # noqa: F401  (registers moe/numba_naive)
import kernels.moe.v2_cuda_permute as permute
import workbench as wb
from tests._ops import variant_report, variant_reports
from tests.conftest import CPU_MODE, cuda_engine_ready
from workbench import inspection
from workbench.cuda.errors import ToolchainNotFoundError

SHAPES = wb.get_op("moe").check_shapes


def _has_cuda_tools() -> bool:
    try:
        for tool in ("nvcc", "ptxas", "cuobjdump"):
            inspection.find_cuda_tool(tool)
        return True
    except ToolchainNotFoundError:
        return False


def _no_renorm(shapes: list[dict]) -> list[dict]:
    return [{**s, "renormalize": False} for s in shapes]


def _cuda() -> wb.Variant:
    if cuda_engine_ready():
        pytest.skip(cuda_engine_ready())
    return wb.variant("moe", "cuda_permute")


def test_numba_naive_is_checked_in_both_dtypes_and_cases_and_without_renormalize():
    """tests/test_ops.py requires its reports to pass (the simulator costs ~1 s a run: every shape and case, the two
    dtypes split between the cases and one seed in cpu mode); here: what they cover, and renormalize off."""
    v = wb.variant("moe", "numba_naive")
    checked = set()
    for rep in variant_reports("moe", "numba_naive"):
        assert not rep.skipped, rep.skipped
        checked |= {(c.dtype, c.case) for c in rep.cases}
    assert {d for d, _ in checked} == {"float32", "float16"} and {c for _, c in checked} == {"random", "one_expert"}
    rep = wb.check(v, shapes=_no_renorm(SHAPES[:1]), dtypes=("float32",), cases=("random",), seeds=(0,))
    assert rep.ok, rep.summary()


def test_cuda_permute_is_checked_in_every_dtype_and_without_renormalize():
    """tests/test_ops.py requires its report to pass (the op's shapes and one with two row tiles per expert)."""
    v = _cuda()
    rep = variant_report("moe", "cuda_permute")
    assert any(c.shape["T"] == 70 for c in rep.cases)
    assert not rep.skipped, rep.skipped
    assert {c.dtype for c in rep.cases} == {"float32", "float16", "bfloat16"}
    assert {c.case for c in rep.cases} == {"random", "one_expert"}
    rep = wb.check(v, shapes=_no_renorm(SHAPES), dtypes=("float32",), seeds=(0,))
    assert rep.ok, rep.summary()


def test_cuda_permute_is_deterministic():
    # moe_align's atomics may order the slots of a group differently each run, but a row's GEMM never mixes rows
    # and the combine adds a token's k terms in slot order: the output bits cannot change.
    v = _cuda()
    inputs = wb.make_inputs("moe", dtype="float16", T=70, d=65, I=70, E=2, top_k=2)
    assert torch.equal(v(*inputs), v(*inputs))


def test_refusals_say_why():
    naive, cuda = wb.variant("moe", "numba_naive"), wb.variant("moe", "cuda_permute")
    assert naive.dtypes == (torch.float32, torch.float16) and cuda.dtypes == wb.get_op("moe").dtypes
    big = {"T": 4096, "d": 4096, "I": 14336, "E": 8, "top_k": 2}
    why = naive.why_not_here("float32", big)
    assert (why is not None and "simulator" in why and "GPU" in why) if CPU_MODE else why is None
    assert all(naive.supports(s) is None for s in SHAPES)
    why = cuda.supports({**big, "E": 2048})
    assert why and "E <= 1024" in why and "2048" in why
    assert cuda.supports(big) is None


@pytest.mark.skipif(not _has_cuda_tools(), reason="nvcc/ptxas/cuobjdump not installed")
def test_moe_experts_compiles_for_sm_90():
    v = wb.variant("moe", "cuda_permute")
    assert v.cu_file is not None and v.cu_file.exists()
    r = wb.inspect(v, arch="sm_90")  # moe_gemm_nt_f16; ptxas compiles the file's other f16 kernels alongside
    assert r.symbol == "moe_gemm_nt_f16" and r.threads_per_block == permute.GEMM_THREADS
    assert r.shared_static == 2 * 16 * (64 + 4) * 4  # the two transposed fp32 tiles, padded rows
    assert 0 < r.registers <= 64 and r.spill_stores == 0 and r.spill_loads == 0  # __launch_bounds__(256, 4)
    assert r.occupancy["sm_90"]["blocks_per_sm"] >= 4
    assert r.instruction_mix.get("FFMA") and r.instruction_mix.get("BAR")
    for name in ("permute", "gemm_nt", "silu_mul", "combine"):
        fn = f"moe_{name}_f16"
        m = re.search(r"Function properties for " + fn + r"\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", r.ptxas_log)
        assert m, f"{fn} is missing from the ptxas log"
        assert m.groups() == ("0", "0", "0"), f"{fn}: stack/spills {m.groups()}"
