"""The CuTe DSL gemm variants: registered GPU-only, compiled for sm_90a without a GPU, read by wb.inspect.

Each kernel is compiled once per module (``cute.compile`` on fake tensors, about 1-2 s each); the same host functions
are traced once more on CPU torch tensors (the launch's dlpack wrapping, shapes and strides as runtime values): what
a GPU run does before its launch. On a GPU the variants are checked on ragged and TMA-aligned shapes.
"""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from tests.conftest import CPU_MODE
from workbench.registry import UnsupportedHere

NAMES = ("cute_simt", "cute_wgmma_tma")


@pytest.fixture(scope="module")
def inspected() -> dict:
    """Return {name: wb.inspect(variant)}: each kernel compiled once for sm_90a."""
    return {n: wb.inspect(wb.variant("gemm", n)) for n in NAMES}


def test_registered_gpu_only_after_triton_in_the_ladder():
    names = [v.name for v in wb.variants("gemm")]
    assert names.index("triton_persistent_tma") < names.index("cute_simt") < names.index("cute_wgmma_tma")
    assert [v.name for v in wb.variants("gemm", backend="cute")] == list(NAMES)
    for n in NAMES:
        v = wb.variant("gemm", n)
        assert v.backend == "cute" and v.gpu_only and v.source.name.startswith(("v5_", "v6_")), v
    assert wb.variant("gemm", "cute_wgmma_tma").dtypes == (torch.float16, torch.bfloat16)


@pytest.mark.skipif(not CPU_MODE, reason="cpu mode's refusal")
def test_cpu_mode_refuses_to_run_and_points_at_inspect():
    a, b = wb.make_inputs("gemm", M=64, N=64, K=64, dtype="bfloat16")
    for n in NAMES:
        v = wb.variant("gemm", n)
        why = v.why_not_here("bfloat16", {"M": 64, "N": 64, "K": 64})
        assert why and f"gemm/{n}" in why and "no CPU emulator" in why and "sm_90a" in why, why
        assert "workbench.inspect" in why
        with pytest.raises(UnsupportedHere, match="CuTe DSL kernels need an NVIDIA GPU"):
            v(a, b)
    assert not wb.variants("gemm", backend="cute", runnable=True)


def test_tma_variant_refuses_unaligned_strides_naming_op_and_requirement():
    v = wb.variant("gemm", "cute_wgmma_tma")
    why = v.supports({"M": 17, "N": 33, "K": 9})
    assert why.startswith("gemm/cute_wgmma_tma:") and "multiples of 8" in why and "K=9" in why
    assert v.supports({"M": 129, "N": 264, "K": 200}) is None  # ragged M, N and K tails are predicated, not refused
    assert wb.variant("gemm", "cute_simt").supports is None  # SIMT: every shape, edges predicated


def test_wgmma_kernel_shows_wgmma_and_tma(inspected):
    r = inspected["cute_wgmma_tma"]
    assert r.kind == "cute" and r.arch == "sm_90a"
    assert r.instruction_mix["HGMMA"] >= 4  # 4 k-steps of 16 per 64-wide stage, unrolled
    assert any(op.startswith("HGMMA.64x256x16") or op == "HGMMA.64" for op in r.opcodes), r.opcodes
    assert "HGMMA.64x256x16.F32.BF16" in r.sass and ".tnspB" in r.sass  # b read N-major: transposed in the MMA
    assert r.instruction_mix["UTMALDG (TMA)"] >= 2
    assert "wgmma.mma_async" in r.ptx and "cp.async.bulk.tensor" in r.ptx and "mbarrier" in r.ptx
    assert r.instruction_mix["FFMA"] == 0 and r.instruction_mix["LDGSTS (cp.async)"] == 0
    assert r.spill_stores == 0 and r.spill_loads == 0 and 128 <= r.registers <= 255
    assert r.threads_per_block == 256
    smem = r.occupancy["sm_90"]
    assert smem["blocks_per_sm"] == 1, smem  # ~194 KiB of dynamic shared memory: one block per SM
    assert any("197,632 bytes" in n for n in r.notes), r.notes  # the launch's Storage.size_in_bytes()


def test_simt_kernel_has_no_tensor_core_or_tma(inspected):
    r = inspected["cute_simt"]
    assert r.kind == "cute" and r.arch == "sm_90a"
    assert r.instruction_mix["HGMMA"] == 0 and r.instruction_mix["UTMALDG (TMA)"] == 0
    assert r.instruction_mix["HMMA"] == 0
    assert "wgmma" not in r.ptx and "cp.async.bulk" not in r.ptx
    # 8 k x 4 x 4 outputs per stage, fully unrolled: 128 FFMA; 8 k x (4 + 4) shared loads
    assert r.instruction_mix["FFMA"] == 128 and r.instruction_mix["LDS"] == 64
    assert r.spill_stores == 0 and r.registers <= 64 and r.threads_per_block == 256


def test_compiled_object_keeps_ptx_and_cubin(inspected):
    from kernels.gemm import v6_cute_wgmma_tma

    fn = v6_cute_wgmma_tma.inspect_spec()["compile"]("sm_90a")  # the cached compile wb.inspect used
    assert ".target sm_90a" in fn.__ptx__ and isinstance(fn.__cubin__, bytes) and fn.__cubin__[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", NAMES)
def test_launch_arguments_trace_on_cpu_tensors(name):
    """The launch path up to the GPU: dlpack-wrapped torch tensors with runtime shapes compile (one compile, any
    shape); only ``fn(...)`` itself needs a GPU."""
    import importlib

    from kernels import _cute

    mod = importlib.import_module(f"kernels.gemm.{'v5_cute_simt' if name == 'cute_simt' else 'v6_cute_wgmma_tma'}")
    _, cute = _cute.import_cute()
    shapes = [(1, 8, 8), (129, 264, 200)] if name == "cute_wgmma_tma" else [(1, 1, 1), (17, 33, 9), (127, 65, 129)]
    for m, n, k in shapes:
        a, b, c = torch.ones(m, k, dtype=torch.bfloat16), torch.ones(k, n, dtype=torch.bfloat16), \
            torch.empty(m, n, dtype=torch.bfloat16)
        args = mod.cute_args(a, b, c)
        assert all(str(t.element_type) == "BFloat16" for t in args)
        assert "(?,?)" in str(args[0])  # runtime shape: the compiled kernel serves every M, N, K
    import cuda.bindings.driver as cuda

    fn = cute.compile(mod._host(), *args, cuda.CUstream(0))  # the stream type a launch passes (torch's stream)
    assert fn is not None


@pytest.mark.skipif(CPU_MODE, reason="CuTe DSL kernels run on a GPU only")
@pytest.mark.parametrize("name", NAMES)
def test_checks_on_a_gpu(name):
    v = wb.variant("gemm", name)
    shapes = [{"M": 1, "N": 8, "K": 8}, {"M": 129, "N": 264, "K": 200}, {"M": 300, "N": 520, "K": 136},
              {"M": 1000, "N": 1032, "K": 1096}]
    if name == "cute_simt":
        shapes += [{"M": 17, "N": 33, "K": 9}, {"M": 127, "N": 65, "K": 129}]
    r = wb.check(v, shapes=shapes, seeds=(0,))
    assert r.ok, r.summary()


def test_on_a_gpu_without_the_dsl_an_ahead_of_time_build_stands_in(monkeypatch, tmp_path):
    """Where the DSL is missing (the GPU box), the variants run kernels/_cute_aot.py's build: a .so holding the host
    launcher and the sm_90a cubin, linked here. Without a driver its cubin cannot load: a clean error, no crash."""
    from kernels import _cute_aot
    from workbench import registry

    monkeypatch.setattr(registry, "MODE", "gpu")
    monkeypatch.setattr(registry, "_has_cute", lambda: False)
    monkeypatch.setenv("WB_CUTE_AOT", str(tmp_path))
    shape = {"M": 8, "N": 8, "K": 8}
    why = wb.variant("gemm", "cute_wgmma_tma").why_not_here("bfloat16", shape)
    assert why.startswith("gemm/cute_wgmma_tma: the CuTe DSL is not installed in this Python (pip install "
                          "nvidia-cutlass-dsl==4.8.1) and no AOT build in") and "python -m kernels._cute_aot" in why
    manifest = _cute_aot.build(tmp_path, (("cute_wgmma_tma", torch.bfloat16),))
    assert wb.variant("gemm", "cute_wgmma_tma").why_not_here("bfloat16", shape) is None
    assert "has no cute_wgmma_tma for torch.float16" in wb.variant("gemm", "cute_wgmma_tma").why_not_here(
        "float16", shape)
    assert "multiples of 8" in wb.variant("gemm", "cute_wgmma_tma").why_not_here("bfloat16", {"M": 8, "N": 8, "K": 9})
    so = tmp_path / "cute_wgmma_tma_bf16.so"
    assert so.stat().st_size < 4 * 2**20 and manifest.is_file()
    if CPU_MODE:  # no driver: cudart reports it (35 insufficient driver, 100 no device) when the cubin would load
        with pytest.raises(RuntimeError, match=r"loading its cubin failed with CUDA error (35|100)\b"):
            _cute_aot.launcher("cute_wgmma_tma", torch.bfloat16)
    monkeypatch.setattr(_cute_aot, "sources_hash", lambda: "other")  # a build from other sources is refused
    assert "other kernel sources: rebuild it" in wb.variant("gemm", "cute_wgmma_tma").why_not_here("bfloat16", shape)
