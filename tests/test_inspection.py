"""workbench.inspect and the occupancy calculator (no GPU needed; nvcc/ptxas for the compile tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench import inspection
from workbench.cuda import arch, toolchain
from workbench.cuda.errors import ToolchainNotFoundError
from workbench.inspection import inspect, occupancy, occupancy_widget

CU = Path(__file__).parent / "cuda"


def _has_cuda_tools() -> bool:
    try:
        inspection.find_cuda_tool("nvcc")
        inspection.find_cuda_tool("ptxas")
        inspection.find_cuda_tool("cuobjdump")
        return True
    except ToolchainNotFoundError:
        return False


needs_nvcc = pytest.mark.skipif(not _has_cuda_tools(), reason="nvcc/ptxas/cuobjdump not installed")


# ------------------------------------------------------------------------------------------------ occupancy
def test_occupancy_limited_by_shared_memory():
    o = occupancy(256, 64, 48 * 1024, "sm_80")
    assert o["smem_per_block_allocated"] == 48 * 1024 + 1024  # 1 KB reserved per block on sm_80
    assert o["block_limits"] == {"threads": 8, "registers": 4, "shared memory": 3, "blocks": 32}
    assert o["blocks_per_sm"] == 3 and o["active_warps_per_sm"] == 24 and o["limited_by"] == ["shared memory"]
    assert o["occupancy"] == pytest.approx(24 / 64)


def test_occupancy_register_granularity():
    # 255 regs -> 8160 per warp, rounded to 8192 (unit 256): 8 warps fit, 2 blocks of 4 warps
    o = occupancy(128, 255, 0, "sm_90")
    assert o["regs_per_warp_allocated"] == 8192
    assert o["block_limits"]["registers"] == 2 and o["limited_by"] == ["registers"]
    # 33 regs -> 1056 -> 1280 per warp: 51 warps -> rounded down to 48 (warp allocation granularity 4)
    o = occupancy(256, 33, 0, "sm_90")
    assert o["regs_per_warp_allocated"] == 1280 and o["block_limits"]["registers"] == 6


def test_occupancy_threads_and_block_count_limits():
    o = occupancy(1024, 32, 0, "sm_90")
    assert o["blocks_per_sm"] == 2 and set(o["limited_by"]) == {"threads", "registers"}
    o = occupancy(32, 16, 0, "sm_86")
    assert o["blocks_per_sm"] == 16 and o["limited_by"] == ["blocks"] and o["occupancy"] == pytest.approx(16 / 48)
    o = occupancy(64, 32, 100 * 1024, "sm_86")
    assert o["blocks_per_sm"] == 0 and o["notes"]  # over the 99 KB per-block limit


def test_arch_table_and_names():
    assert set(arch.ARCHS) == {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    assert arch.get("90").name == arch.get("sm90").name == arch.get("sm_90a").name == "sm_90"
    assert arch.get("8.9").max_blocks_per_sm == 24 and arch.get("sm_75").smem_alloc_unit == 256
    with pytest.raises(ValueError, match="unknown architecture"):
        arch.get("sm_42")


def test_occupancy_widget_updates():
    pytest.importorskip("ipywidgets")
    box = occupancy_widget(256, 32, 0, "sm_90")
    assert "limited by" in box.output.value
    box.sliders["smem_per_block"].value = 100 * 1024
    assert "shared memory</b>" in box.output.value
    box.sliders["arch"].value = "sm_86"
    assert "sm_86" in box.output.value


# ------------------------------------------------------------------------------------------------ CUDA C
@needs_nvcc
def test_inspect_cuda_sgemm():
    r = inspect((CU / "sgemm.cu", "sgemm_tiled"))
    assert r.kind == "cuda" and r.arch == "sm_90" and r.symbol == "sgemm_tiled"
    assert 8 <= r.registers <= 255 and r.shared_static == 2 * 16 * 16 * 4 and r.spill_stores == 0
    assert r.threads_per_block == 256  # from __launch_bounds__
    mix = r.instruction_mix
    assert mix["FFMA"] >= 16 and mix["BAR"] >= 2 and mix["LDS"] > 0 and mix["STS"] >= 2 and mix["LDG.32"] >= 2
    assert set(r.occupancy) == {"sm_80", "sm_90"} and r.occupancy["sm_90"]["blocks_per_sm"] > 0
    assert ".entry sgemm_tiled" in r.ptx and "FFMA" in r.sass
    assert "registers/thread" in str(r) and "<table>" in r._repr_html_()
    d = r.to_dict()
    assert d["registers"] == r.registers and "ptx" in d and "sass" in d


@needs_nvcc
def test_inspect_raw_kernel_template_and_inline_ptx():
    from workbench import cuda

    r = inspect(cuda.RawKernel(CU / "templates.cu", "scale_t<float,64>"), arch="sm_80", threads_per_block=64)
    assert r.symbol.startswith("_Z7scale_t") and r.arch == "sm_80" and r.threads_per_block == 64
    r = inspect((CU / "inline_ptx.cu", "lane_id_ptx"))  # GPU-only on the CPU engine, but nvcc compiles it
    assert r.registers > 0 and "laneid" in r.ptx


@pytest.fixture
def tool_calls(tmp_path, monkeypatch):
    """The names of the tools inspect runs (nvcc, ptxas, cuobjdump), in a fresh inspect cache."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    calls = []
    real = inspection.run_tool
    monkeypatch.setattr(inspection, "run_tool", lambda cmd, *a, **k: calls.append(Path(cmd[0]).name) or real(
        cmd, *a, **k))
    return calls


@needs_nvcc
def test_cuda_inspection_reads_sass_for_its_own_architecture_only(tool_calls):
    """sm_80's occupancy needs ptxas -v, not cuobjdump; a later inspect at sm_80 itself adds the SASS it lacked."""
    calls = tool_calls
    r = inspect((CU / "warp_reduce.cu", "block_sum"), arch="sm_90")
    assert set(r.occupancy) == {"sm_80", "sm_90"} and "SHFL" in r.sass
    assert sorted(calls) == ["cuobjdump", "nvcc", "nvcc", "ptxas", "ptxas"], calls
    calls.clear()
    r80 = inspect((CU / "warp_reduce.cu", "block_sum"), arch="sm_80", occupancy_archs=())
    assert "SHFL" in r80.sass and r80.registers == r.occupancy["sm_80"]["regs_per_thread"]
    assert sorted(calls) == ["cuobjdump", "nvcc", "ptxas"], calls


@needs_nvcc
def test_inspect_spec_protocol_and_compile_error(tmp_path):
    class Variant:
        def inspect_spec(self):
            return {"kind": "cuda", "code": str(CU / "warp_reduce.cu"), "name": "block_sum", "options": ()}

    r = inspect(Variant())
    assert r.instruction_mix["SHFL"] >= 5 and r.threads_per_block == 1024
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n')
    from workbench.cuda import CompileError

    with pytest.raises(CompileError, match="bad.cu"):
        inspect((bad, "k"))


def test_inspect_triton_kernel():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    try:
        inspection.find_cuda_tool("ptxas")
        inspection.find_cuda_tool("cuobjdump")
    except ToolchainNotFoundError:
        pytest.skip("no ptxas/cuobjdump")

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    class Variant:
        def inspect_spec(self):
            return {"kind": "triton", "fn": add, "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                               "out_ptr": "*fp32", "n": "i32"},
                    "constexprs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 2,
                    "divisible_by_16": ["x_ptr", "y_ptr", "out_ptr", "n"]}

    r = inspect(Variant())
    assert r.kind == "triton" and r.name == "add" and r.threads_per_block == 128
    assert r.registers > 0 and r.instruction_mix["LDG.128"] > 0 and r.ttgir and "ttg." in r.ttgir
    assert set(r.occupancy) == {"sm_80", "sm_90"}


def test_triton_inspection_runs_each_tool_once_per_kernel_across_processes(tool_calls, monkeypatch):
    """The other architecture's occupancy needs ptxas figures only (no cuobjdump), and ptxas -v and cuobjdump
    results are cached on disk: another process (a cleared in-memory cache here) runs neither again."""
    _needs_triton_tools()
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)

    calls = tool_calls
    spec = {"signature": {"x_ptr": "*fp32", "n": "i32"}, "constexprs": {"BLOCK": 256}, "num_warps": 2}
    first = inspect(scale, **spec)
    assert sorted(calls) == ["cuobjdump", "ptxas", "ptxas"], calls  # ptxas -v for sm_90 and sm_80; SASS once
    assert set(first.occupancy) == {"sm_80", "sm_90"} and first.sass
    calls.clear()
    monkeypatch.setattr(inspection, "_cache", {})
    again = inspect(scale, **spec)
    assert calls == [] and again.sass == first.sass and again.registers == first.registers


def _needs_triton_tools() -> None:
    pytest.importorskip("triton")
    try:
        inspection.find_cuda_tool("ptxas")
        inspection.find_cuda_tool("cuobjdump")
    except ToolchainNotFoundError:
        pytest.skip("no ptxas/cuobjdump")


def test_divisibility_hints_follow_a_real_launch():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "M": "i32", "K": "i64", "scale": "fp32", "BM": "constexpr"}
    assert inspection.divisible_by_16({"signature": sig}) == ["a_ptr", "b_ptr", "M", "K"]  # 16-multiple launch
    assert inspection.divisible_by_16({"signature": sig, "args": {"M": 4096, "K": 4100}}) == ["a_ptr", "b_ptr", "M"]
    assert inspection.divisible_by_16({"signature": sig, "args": {"a_ptr": 0x1008}}) == ["b_ptr", "M", "K"]
    assert inspection.divisible_by_16({"signature": sig, "divisible_by_16": ["a_ptr"]}) == ["a_ptr"]


def test_triton_gemm_inspects_as_a_real_k4096_launch():
    # A launch at M = N = K = 4096 specialises M, N, K as multiples of 16; only then does Triton pipeline the
    # K loop (num_stages buffers of (BM + BN) x BK halves). Pointers alone gave an unpipelined kernel that spilled.
    _needs_triton_tools()
    import workbench as wb

    v = wb.variant("gemm", "triton_autotuned")
    spec = v.inspect_spec()
    c = spec["constexprs"]
    r = inspect(v, arch="sm_90")
    assert r.shared_static == spec["num_stages"] * (c["BM"] + c["BN"]) * c["BK"] * 2
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.registers <= 232
    assert r.instruction_mix["HGMMA"] > 0 and r.instruction_mix["LDGSTS (cp.async)"] > 0
    assert any("multiples of 16" in n for n in r.notes)
    # The cache is keyed by the hints too: a K that is not a multiple of 16 is another kernel, not the same numbers.
    odd = inspect(v, arch="sm_90", args={"K": 4100})
    assert odd is not r and odd.shared_static < r.shared_static
    assert inspect(v, arch="sm_90") is r


# ------------------------------------------------------------------------------------------------ no toolchain
def test_missing_toolchain_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(toolchain, "cuda_bin_dirs", lambda: [])
    monkeypatch.setattr(toolchain, "triton_bin_dir", lambda: None)
    assert shutil.which("nvcc") is None
    with pytest.raises(ToolchainNotFoundError, match=r"nvcc.*pip install nvidia-cuda-nvcc"):
        inspect((CU / "sgemm.cu", "sgemm_tiled"), arch="sm_75")


@needs_nvcc
def test_inspect_triton_after_interpreted_helpers_ran(tmp_path):
    # Triton 3.7's interpreter leaks its triton.language patches after a @jit helper call (tl.max, tl.sum);
    # workbench undoes them, so a kernel can still be compiled for inspection afterwards (fresh Triton cache).
    import subprocess
    import sys

    from tests.conftest import subprocess_env

    code = ("import workbench as wb\n"
            "x = wb.make_inputs('softmax', M=4, N=100)\n"
            "wb.variant('softmax', 'triton_fused')(*x)\n"
            "print('regs', wb.inspect(wb.variant('softmax', 'triton_online'), arch='sm_90').registers)\n")
    env = subprocess_env(WORKBENCH_MODE="cpu", TRITON_CACHE_DIR=str(tmp_path / "triton"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "regs " in r.stdout
