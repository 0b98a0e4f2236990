"""workbench.cuda facade and CPU-engine behaviour: arguments, errors, caching, launch checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="CPU-engine behaviour")

SAXPY = r"""
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void fill64(long long* out, long long v, double d) {
  out[threadIdx.x] = v + (long long)d;
}
"""


@pytest.fixture(scope="module")
def mod():
    from workbench import cuda

    return cuda.RawModule(code=SAXPY).compile()


def test_raw_kernel_call_convention(mod):
    from workbench import cuda

    k = cuda.RawKernel(SAXPY, "saxpy")
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    assert k((1,), (128,), (x, y, np.float32(2), np.int32(100))) is None
    np.testing.assert_array_equal(y, 2 * x + 1)
    k(1, 128, [x, y, np.float32(1), 100], shared_mem=0)  # ints for dims, list args, Python int -> int
    np.testing.assert_array_equal(y, 3 * x + 1)
    assert sorted(mod.kernel_names) == ["fill64", "saxpy"]


def test_python_scalars_like_cupy(mod):
    out = np.zeros(4, np.int64)
    mod.get_function("fill64")((1,), (4,), (out, 2**40, 1.0))  # int -> long long, float -> double
    np.testing.assert_array_equal(out, 2**40 + 1)


def test_torch_cpu_tensors(mod):
    torch = pytest.importorskip("torch")
    x = torch.arange(10, dtype=torch.float32)
    y = torch.zeros(10)
    mod.get_function("saxpy")((1,), (32,), (x, y, np.float32(3), np.int32(10)))
    assert torch.equal(y, 3 * x)


@pytest.mark.parametrize("args, pattern", [
    (lambda x, y: (x, y, np.float32(1)), r"kernel 'saxpy' takes 4 arguments \(const float\* x, float\* y, float a, "
                                         r"int n\) but 3 were given"),
    (lambda x, y: (x, y, 1.0, np.int32(3)), r"parameter 2 'a' \(float\).*Python float.*np\.float32\(1\.0\)"),
    (lambda x, y: (x, y, np.float64(1), np.int32(3)), r"parameter 2 'a' \(float\): expected np\.float32, got "
                                                     r"np\.float64"),
    (lambda x, y: (x, y, np.float32(1), 2**40), r"parameter 3 'n' \(int\).*does not fit"),
    (lambda x, y: (x.astype(np.float64), y, np.float32(1), 3), r"parameter 0 'x' \(const float\*\): expected an "
                                                               r"array of float, got numpy.ndarray\(dtype=float64"),
    (lambda x, y: (x, np.float32(1), np.float32(1), 3), r"parameter 1 'y' \(float\*\): expected a numpy array"),
    (lambda x, y: (x, y, x, 3), r"parameter 2 'a' \(float\): expected a scalar"),
    (lambda x, y: (x.reshape(2, 4).T, y, np.float32(1), 3), r"not C-contiguous"),
])
def test_argument_errors_name_kernel_and_parameter(mod, args, pattern):
    from workbench.cuda import KernelArgumentError

    x = np.zeros(8, np.float32)
    y = np.zeros(8, np.float32)
    with pytest.raises(KernelArgumentError, match=pattern):
        mod.get_function("saxpy")((1,), (8,), args(x, y))


@pytest.mark.parametrize("code, value, packed", [
    ("s4", b"abcd", b"abcd"), ("s2", np.array([1, 2], np.uint8), b"\x01\x02"), ("f16", np.float16(1), b"\x00<"),
    ("b", True, b"\x01"), ("u8", 255, b"\xff"), ("i32", np.int32(-1), b"\xff" * 4),
    ("f64", 0.5, b"\x00" * 6 + b"\xe0?"),
])
def test_scalars_pack_as_cupy_would(code, value, packed):
    from workbench.cuda import _cpu_args

    assert _cpu_args._scalar("p", code, value).raw == packed


@pytest.mark.parametrize("code, value, pattern", [
    ("s4", b"abc", "expected 4 bytes, got 3"), ("s4", 7, "pass a by-value struct"), ("f16", 1.0, "expected np.float16"),
    ("bf16", np.float16(1), "expected a bfloat16 scalar"), ("q9", 1, "unsupported parameter type code 'q9'"),
    ("i32", True, "got a Python bool; pass np.int32"), ("f32", 3, "got Python int 3.*np.float32\\(3\\)"),
    ("u8", 256, "256 does not fit in unsigned char"), ("i64", "7", "expected a scalar \\(np.int64\\), got"),
])
def test_scalar_errors_say_what_to_pass(code, value, pattern):
    from workbench.cuda import KernelArgumentError, _cpu_args

    with pytest.raises(KernelArgumentError, match=f"^p: {pattern}"):
        _cpu_args._scalar("p", code, value)


def test_launch_config_errors(mod):
    from workbench.cuda import LaunchConfigError

    f = mod.get_function("saxpy")
    x = np.zeros(8, np.float32)
    args = (x, x.copy(), np.float32(1), np.int32(8))
    with pytest.raises(LaunchConfigError, match=r"'saxpy'.*at most 1024 threads"):
        f((1,), (2048,), args)
    with pytest.raises(LaunchConfigError, match=r"grid"):
        f((1, 70000), (32,), args)
    with pytest.raises(LaunchConfigError, match="max_dynamic_shared_size_bytes"):
        f((1,), (32,), args, shared_mem=64 * 1024)
    f.max_dynamic_shared_size_bytes = 64 * 1024
    f((1,), (32,), args, shared_mem=64 * 1024)


def test_unknown_kernel_and_template_hint():
    from workbench import cuda
    from workbench.cuda import CompileError, KernelArgumentError

    m = cuda.RawModule(code="template <int N> __global__ void t(float* x) { x[0] = N; }\n"
                            'extern "C" __global__ void k(float* x) { x[0] = 1; }\n')
    with pytest.raises(KernelArgumentError, match=r"no kernel named 'nope'.*available: k.*name_expressions"):
        m.get_function("nope")
    with pytest.raises(KernelArgumentError, match=r"no kernel named 'missing'.*available: k"):
        cuda.RawKernel('extern "C" __global__ void k(float* x) {}\n', "missing").compile()
    with pytest.raises(CompileError, match=r"kernel 'u<1>' is not defined.*found: k, t"):
        cuda.RawModule(code=m.code, name_expressions=["u<1>"]).compile()
    out = np.zeros(1, np.float32)
    cuda.RawModule(code=m.code, name_expressions=["t<7>"]).get_function("t<7>")((1,), (1,), (out,))
    assert out[0] == 7


def test_compile_error_shows_user_file_and_line(tmp_path):
    from workbench import cuda
    from workbench.cuda import CompileError

    p = tmp_path / "broken.cu"
    p.write_text('// a comment\nextern "C" __global__ void k(float* x) {\n  x[0] = not_declared + 1;\n}\n')
    with pytest.raises(CompileError) as ei:
        cuda.RawKernel(str(p), "k").compile()
    assert f"{p}:3:" in str(ei.value) and "not_declared" in str(ei.value)
    assert ei.value.path == str(p)


def test_relative_include_and_cache_invalidation(tmp_path, monkeypatch):
    from workbench import cuda
    from workbench.cuda import _cpu_build

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "common.cuh").write_text("#define VALUE 5\n")
    p = tmp_path / "k.cu"
    p.write_text('#include "common.cuh"\nextern "C" __global__ void k(int* o) { o[0] = VALUE; }\n')
    out = np.zeros(1, np.int32)
    cuda.RawKernel(p, "k")((1,), (1,), (out,))
    assert out[0] == 5
    builds = []
    real_build = _cpu_build.CpuModule._build
    monkeypatch.setattr(_cpu_build.CpuModule, "_build", lambda self, *a: builds.append(1) or real_build(self, *a))
    _cpu_build._loaded.clear()  # a new process: only the disk cache is left
    cuda.RawKernel(p, "k")((1,), (1,), (out,))
    assert builds == [] and out[0] == 5
    (tmp_path / "common.cuh").write_text("#define VALUE 6\n")  # a header change invalidates the disk cache
    _cpu_build._loaded.clear()
    cuda.RawKernel(p, "k")((1,), (1,), (out,))
    assert builds == [1] and out[0] == 6
    assert len(list((tmp_path / "cache" / "cuda").glob("k-*.so"))) == 2


def test_in_process_cache_is_shared():
    from workbench import cuda
    from workbench.cuda import _cpu_build

    a = cuda.RawKernel(SAXPY, "saxpy").compile()
    n = len(_cpu_build._loaded)
    b = cuda.RawKernel(SAXPY, "saxpy").compile()
    assert len(_cpu_build._loaded) == n and a._module._cpu[False]._lib is b._module._cpu[False]._lib


def test_checked_call_kwarg_and_missing_file():
    from workbench import cuda
    from workbench.cuda import CudaError, MemcheckError

    k = cuda.RawKernel('extern "C" __global__ void k(float* x, int n) { x[threadIdx.x + n] = 1; }', "k")
    x = np.zeros(8, np.float32)
    k((1,), (8,), (x, np.int32(0)))
    pat = r"Invalid __global__ write of size 4 on 'x' \(0 bytes after the end of a 32-byte"
    with pytest.raises(MemcheckError, match=pat):
        k((1,), (8,), (x, np.int32(1)), checked=True)
    with pytest.raises(CudaError, match="not found"):
        cuda.RawKernel("does/not/exist.cu", "k")


def test_blocks_run_in_parallel_threads_env(monkeypatch):
    from workbench.cuda import _cpu

    monkeypatch.setenv("WORKBENCH_CPU_THREADS", "3")
    assert _cpu.n_threads() == 3
    monkeypatch.delenv("WORKBENCH_CPU_THREADS")
    assert _cpu.n_threads() >= 1


def test_options_translation():
    from workbench.cuda._cpu_build import translate_options

    flags, ignored = translate_options(("-DX=1", "--use_fast_math", "-I", "/inc", "-std=c++17", "-arch=sm_90",
                                        "--define-macro=Y"))
    assert flags == ["-DX=1", "-I/inc", "-std=c++17", "-DY"]
    assert ignored == ["--use_fast_math", "-arch=sm_90"]


RTC = 'extern "C" __global__ void rtc(int* out) { out[0] = __CUDACC_RTC__; }  // %s\n'


def test_modules_compile_with_the_precompiled_prelude_and_a_macro_it_reads_still_counts(monkeypatch):
    import uuid

    from workbench import cuda
    from workbench.cuda import _cpu_build

    compiles = []
    real = _cpu_build._run_compiler
    monkeypatch.setattr(_cpu_build, "_run_compiler",
                        lambda cmd, *a, **k: compiles.append(cmd) or real(cmd, *a, **k))
    out = np.zeros(1, np.int32)
    cuda.RawKernel(RTC % uuid.uuid4(), "rtc")((1,), (1,), (out,))
    assert out[0] == 1  # the prelude defines __CUDACC_RTC__ as NVRTC does
    cmd = next(c for c in compiles if "-c" in c and c[c.index("-c") + 1].endswith("kernel.cpp"))
    pch = Path(cmd[cmd.index("-I") + 1])
    assert pch.name.startswith("pch-") and (pch / "wb_cuda.h.gch").is_file(), cmd
    assert cmd.index(str(pch)) < cmd.index(str(_cpu_build.INCLUDE_DIR))  # found before wb_cuda.h itself
    # a -D that the prelude reads: GCC finds the .gch unusable and reads the header, so the macro wins
    cuda.RawKernel(RTC % uuid.uuid4(), "rtc", options=("-D__CUDACC_RTC__=7",), frontend=False)((1,), (1,), (out,))
    assert out[0] == 7
