"""One place finds the compilers: the CPU engine, build_cubin, inspect and doctor all ask workbench.cuda.toolchain."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workbench import __main__ as cli
from workbench import inspection, versions
from workbench.cuda import _cpu_build, toolchain
from workbench.cuda.errors import ToolchainNotFoundError


def test_every_layer_uses_the_same_finders() -> None:
    assert inspection.find_cuda_tool is toolchain.find_cuda_tool
    assert _cpu_build.find_cxx is toolchain.find_cxx and _cpu_build.cache_dir is toolchain.cache_dir


def test_the_cuda_layer_does_not_import_inspection() -> None:
    code = ("import sys, workbench.cuda, workbench.cuda._cpu, workbench.cuda._cubin; "
            "print('workbench.inspection' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_cxx_comes_from_cxx_env_and_doctor_says_so(monkeypatch, tmp_path) -> None:
    fake = tmp_path / "my-c++"
    fake.write_text("#!/bin/sh\necho fake 1.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    assert toolchain.find_cxx() == str(fake)
    assert cli._cpu_engine_status() == ("emulated", f"CPU engine: CUDA C compiled with {fake}, one fiber per "
                                                    "CUDA thread")
    monkeypatch.setenv("CXX", str(tmp_path / "missing-c++"))
    with pytest.raises(ToolchainNotFoundError, match=r"missing-c\+\+.*apt-get install g\+\+"):
        toolchain.find_cxx()
    assert cli._cpu_engine_status()[0] == "unavailable"


def test_missing_cuda_tools_are_none_for_doctor_and_errors_for_inspect(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(toolchain, "cuda_bin_dirs", lambda: [])
    monkeypatch.setattr(toolchain, "triton_bin_dir", lambda: None)
    versions.nvcc_version.cache_clear()
    try:
        assert versions.nvcc_version() is None
    finally:
        versions.nvcc_version.cache_clear()
    for tool in toolchain.CUDA_TOOLS:
        with pytest.raises(ToolchainNotFoundError, match=rf"{tool}.*pip install nvidia-cuda-nvcc"):
            toolchain.find_cuda_tool(tool)
    with pytest.raises(ValueError, match="unknown CUDA tool 'nvcc2'"):
        toolchain.find_cuda_tool("nvcc2")


def test_cuda_home_is_searched(monkeypatch, tmp_path) -> None:
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "ptxas"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert toolchain.find_cuda_tool("ptxas") == str(exe)


def test_run_tool_names_what_is_missing(tmp_path) -> None:
    with pytest.raises(ToolchainNotFoundError, match=r"cannot run .*nvcc' \(nvcc\).*CUDA toolkit"):
        toolchain.run_tool([str(tmp_path / "nvcc"), "--version"], "nvcc")
    with pytest.raises(ToolchainNotFoundError, match=r"to compile x\.cu.*\$CXX"):
        toolchain.run_tool([str(tmp_path / "g++")], "to compile x.cu")


def test_nvcc_options_drop_architecture_flags() -> None:
    opts = ["-arch=sm_80", "--gpu-architecture=sm_90", "-gencode=arch=compute_90,code=sm_90", "-O3", "-lineinfo"]
    assert toolchain.nvcc_options(opts) == ["-O3", "-lineinfo"]


def test_cache_dirs_live_under_workbench_cache(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    assert toolchain.cache_dir() == tmp_path / "cuda" and (tmp_path / "cuda").is_dir()
    assert toolchain.cache_dir("cubin") == tmp_path / "cubin"


def test_nvcc_cache_key_follows_local_includes_into_other_folders(tmp_path) -> None:
    """An edit to a header two includes away (kernels/include/*.cuh from ../include/) must give a new key."""
    (tmp_path / "op").mkdir()
    (tmp_path / "include").mkdir()
    cu = tmp_path / "op" / "k.cu"
    cu.write_text('#include "../include/helpers.cuh"\n#include <cuda_fp16.h>\n__global__ void k() {}\n')
    (tmp_path / "include" / "helpers.cuh").write_text('#include "inner.cuh"\n')
    inner = tmp_path / "include" / "inner.cuh"
    inner.write_text("#define A 1\n")
    nvcc = sys.executable  # any existing file: the key reads its path and modification time
    before = toolchain.nvcc_cache_key(cu.read_text(), str(cu), nvcc)
    assert toolchain.local_includes(cu.read_text(), cu.parent) == [tmp_path / "include" / "helpers.cuh", inner]
    assert toolchain.nvcc_cache_key(cu.read_text(), str(cu), nvcc) == before
    inner.write_text("#define A 2\n")
    assert toolchain.nvcc_cache_key(cu.read_text(), str(cu), nvcc) != before
